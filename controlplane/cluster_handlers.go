package controlplane

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/felixmq/felix/cluster"
	"github.com/felixmq/felix/controlplane/api"
)

// Resources the cluster endpoints authorize on.
const (
	resourceMembers   = "cluster:members"
	resourcePlacement = "cluster:placement"
)

func (s *Server) clusterRoutes(add func(method, pattern string, h handlerFunc)) {
	add(http.MethodPost, "/v1/members", s.register)
	add(http.MethodGet, "/v1/members", s.listMembers)
	add(http.MethodPost, "/v1/members/{id}/keepalive", s.keepAlive)
	add(http.MethodDelete, "/v1/members/{id}", s.leave)
	add(http.MethodGet, "/v1/placement", s.placement)
	s.shardRoutes(add)
}

// cluster authorizes r and returns the placer, or an error when this
// server's store keeps no membership.
func (s *Server) cluster(r *http.Request, action, resource string) (*Placer, error) {
	if err := s.authorize(r, action, resource); err != nil {
		return nil, err
	}
	if s.placer == nil {
		return nil, apiErr(ErrNotFound, "this control plane's store keeps no cluster membership")
	}
	return s.placer, nil
}

// memberRequest authorizes a request on one member (node credential) and
// reads and checks its {id}.
func (s *Server) memberRequest(r *http.Request) (MemberStore, string, error) {
	pl, err := s.cluster(r, ActionClusterNode, resourceMembers)
	if err != nil {
		return nil, "", err
	}
	id := r.PathValue("id")
	return pl.members, id, ValidName("id", id)
}

func validMember(m api.RegisterRequest) error {
	if err := ValidName("id", m.ID); err != nil {
		return err
	}
	for field, addr := range map[string]string{"quic_addr": m.QUICAddr, "admin_addr": m.AdminAddr} {
		if addr == "" && field == "admin_addr" {
			continue
		}
		if _, port, err := net.SplitHostPort(addr); err != nil || port == "" || port == "0" {
			return invalid("%s %q: want host:port with a port other than 0", field, addr)
		}
	}
	if m.Zone != "" {
		return ValidName("zone", m.Zone)
	}
	return nil
}

func validLoad(load []cluster.ShardLoad) error {
	for _, l := range load {
		if l.BytesPerSec < 0 || l.Shard.Shard < 0 {
			return invalid("load of %s: want a shard >= 0 and bytes_per_s >= 0, not %d", l.Shard, l.BytesPerSec)
		}
	}
	return nil
}

// register handles POST /v1/members.
func (s *Server) register(w http.ResponseWriter, r *http.Request) error {
	pl, err := s.cluster(r, ActionClusterNode, resourceMembers)
	if err != nil {
		return err
	}
	var req api.RegisterRequest
	if err := s.decodeBody(w, r, &req); err != nil {
		return err
	}
	if err := validMember(req); err != nil {
		return err
	}
	m := cluster.Member{ID: req.ID, QUICAddr: req.QUICAddr, AdminAddr: req.AdminAddr, Zone: req.Zone, Live: true}
	ttl, err := pl.members.Register(r.Context(), m, pl.LeaseTTL())
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, api.RegisterResponse{Member: m, LeaseTTLMS: ttl.Milliseconds()})
}

// keepAlive handles POST /v1/members/{id}/keepalive. Its body, a
// api.KeepAliveRequest, is optional: brokers that report no load send
// none. A replica report is stored once the lease is renewed: only a live
// member's counts.
func (s *Server) keepAlive(w http.ResponseWriter, r *http.Request) error {
	ms, id, err := s.memberRequest(r)
	if err != nil {
		return err
	}
	var req api.KeepAliveRequest
	body := bufio.NewReader(r.Body)
	if _, err := body.Peek(1); err == nil {
		r.Body = io.NopCloser(body) // the server closes the original
		if err := s.decodeBody(w, r, &req); err != nil {
			return err
		}
		if err := validLoad(req.Load); err != nil {
			return err
		}
		if req.Replicas != nil {
			if req.Replicas, err = validReports(id, req.Replicas); err != nil {
				return err
			}
		}
	}
	ttl, err := ms.KeepAlive(r.Context(), id, req.Load)
	if err != nil {
		return err
	}
	if req.Replicas != nil {
		if err := ms.ReportReplicas(r.Context(), id, req.Replicas); err != nil {
			return err
		}
	}
	return writeJSON(w, http.StatusOK, api.KeepAliveResponse{LeaseTTLMS: ttl.Milliseconds()})
}

// leave handles DELETE /v1/members/{id}.
func (s *Server) leave(w http.ResponseWriter, r *http.Request) error {
	ms, id, err := s.memberRequest(r)
	if err != nil {
		return err
	}
	if err := ms.Leave(r.Context(), id); err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, api.LeaveResponse{ID: id})
}

// listMembers handles GET /v1/members.
func (s *Server) listMembers(w http.ResponseWriter, r *http.Request) error {
	pl, err := s.cluster(r, ActionClusterView, resourceMembers)
	if err != nil {
		return err
	}
	members, err := pl.members.Members(r.Context())
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, api.MembersResponse{Members: members})
}

// placement handles GET /v1/placement[?after=V&wait_ms=N]. Without after it
// answers the stored placement at once; with it, it waits until the
// version differs from after (newer, or from a replaced store) or wait_ms
// passes (default MaxWait; a longer wait is cut to MaxWait, so that a
// client's default never fails on a server with a shorter bound), then
// answers the current one. See placementScope for whose shards it shows.
func (s *Server) placement(w http.ResponseWriter, r *http.Request) error {
	pl, err := s.cluster(r, ActionClusterView, resourcePlacement)
	if err != nil {
		return err
	}
	maxMS := s.cfg.MaxWait.Milliseconds()
	waitMS, err := queryInt(r, "wait_ms", maxMS, 0, 1<<31)
	if err != nil {
		return err
	}
	waitMS = min(waitMS, maxMS)
	var p cluster.Placement
	if !r.URL.Query().Has("after") {
		if p, err = pl.members.Placement(r.Context()); err != nil {
			return err
		}
	} else {
		after, err := queryInt(r, "after", 0, 0, 1<<62)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(r.Context(), time.Duration(waitMS)*time.Millisecond)
		defer cancel()
		defer context.AfterFunc(s.stop, cancel)()
		s.metrics.placementWaiters.Add(1)
		p = pl.Wait(ctx, after)
		s.metrics.placementWaiters.Add(-1)
	}
	return writeJSON(w, http.StatusOK, s.placementScope(r, p))
}

// placementScope narrows p to what r's credential may see: brokers (node
// credentials, operator admins, the bootstrap token: whoever may register
// a node) see every shard; any other token only its own tenant's (other
// tenants' stream names are theirs). Every member stays listed: clients
// need the owners' addresses, not who else holds what.
func (s *Server) placementScope(r *http.Request, p cluster.Placement) cluster.Placement {
	if s.authorize(r, ActionClusterNode, resourceMembers) == nil {
		return p
	}
	tok, _ := bearer(r)             // authorized above, so present
	tenant := unverifiedTenant(tok) // verified by the cluster.view check
	mine := make([]cluster.Assignment, 0, len(p.Assignments))
	for _, a := range p.Assignments {
		if a.Tenant == tenant {
			mine = append(mine, a)
		}
	}
	p.Assignments = mine
	return p
}
