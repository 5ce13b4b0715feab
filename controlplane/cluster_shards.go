package controlplane

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/felixmq/felix/cluster"
	"github.com/felixmq/felix/controlplane/api"
)

// shardPath is the route of one shard's operator calls.
const shardPath = "/v1/shards/{tenant}/{namespace}/{stream}/{shard}"

func (s *Server) shardRoutes(add func(method, pattern string, h handlerFunc)) {
	add(http.MethodPost, shardPath+"/move", s.moveShard)
	add(http.MethodPost, shardPath+"/leader", s.shardLeader)
}

// moveShard handles POST /v1/shards/{tenant}/{namespace}/{stream}/{shard}/move.
func (s *Server) moveShard(w http.ResponseWriter, r *http.Request) error {
	var req api.MoveRequest
	return s.changeShard(w, r, &req, func(p cluster.Placement, sh cluster.Shard) (cluster.Placement, error) {
		if err := cmp.Or(ValidName("from", req.From), ValidName("to", req.To)); err != nil {
			return p, err
		}
		return p.MoveReplica(sh, req.From, req.To)
	})
}

// shardLeader handles POST /v1/shards/{tenant}/{namespace}/{stream}/{shard}/leader.
func (s *Server) shardLeader(w http.ResponseWriter, r *http.Request) error {
	var req api.LeaderRequest
	return s.changeShard(w, r, &req, func(p cluster.Placement, sh cluster.Shard) (cluster.Placement, error) {
		if err := ValidName("to", req.To); err != nil {
			return p, err
		}
		return p.PreferLeader(sh, req.To)
	})
}

// changeShard authorizes an operator's change of the shard in r's path,
// decodes its body into req and stores change's result (see
// Placer.Change).
func (s *Server) changeShard(w http.ResponseWriter, r *http.Request, req any,
	change func(cluster.Placement, cluster.Shard) (cluster.Placement, error)) error {
	pl, err := s.cluster(r, ActionClusterManage, "cluster:shards/"+strings.TrimPrefix(r.URL.Path, "/v1/shards/"))
	if err != nil {
		return err
	}
	sh, err := pathShard(r)
	if err != nil {
		return err
	}
	if err := s.decodeBody(w, r, req); err != nil {
		return err
	}
	p, err := pl.Change(r.Context(), func(p cluster.Placement) (cluster.Placement, error) { return change(p, sh) })
	if err != nil {
		return changeErr(err)
	}
	a, _ := cluster.NewIndex(p).Assignment(sh)
	return writeJSON(w, http.StatusOK, api.ShardChangeResponse{Version: p.Version, Assignment: a})
}

// pathShard reads and checks the shard named by r's path.
func pathShard(r *http.Request) (cluster.Shard, error) {
	sh := cluster.Shard{Tenant: r.PathValue("tenant"), Namespace: r.PathValue("namespace"), Stream: r.PathValue("stream")}
	n, err := strconv.Atoi(r.PathValue("shard"))
	if err != nil || n < 0 || n >= MaxShards {
		return sh, invalid("shard %q: want an integer in [0, %d)", r.PathValue("shard"), MaxShards)
	}
	sh.Shard = n
	return sh, cmp.Or(ValidName("tenant", sh.Tenant), ValidName("namespace", sh.Namespace), ValidName("stream", sh.Stream))
}

// changeErr maps a refused change onto the API's errors.
func changeErr(err error) error {
	var ce *cluster.ChangeError
	if !errors.As(err, &ce) {
		return err
	}
	switch ce.Err {
	case cluster.ErrNoShard:
		return apiErr(ErrNotFound, "shard %s is not a replicated shard of the placement", ce.Shard)
	case cluster.ErrShardMoving:
		return apiErr(ErrMoving, "shard %s is moving: %s; retry once its report shows the new set in sync", ce.Shard, ce.Reason)
	}
	return invalid("shard %s: %s", ce.Shard, ce.Reason)
}

// validReports checks the replica reports of member id and returns them
// normalised (by shard, each list sorted), so that the same report always
// stores the same bytes.
func validReports(id string, reports []cluster.ReplicaReport) ([]cluster.ReplicaReport, error) {
	out := make([]cluster.ReplicaReport, len(reports))
	for i, rep := range reports {
		if err := validReport(id, rep); err != nil {
			return nil, err
		}
		rep.Voters, rep.Learners, rep.InSync = slices.Sorted(slices.Values(rep.Voters)), sortedOrNil(rep.Learners), slices.Sorted(slices.Values(rep.InSync))
		out[i] = rep
	}
	slices.SortFunc(out, func(a, b cluster.ReplicaReport) int {
		return cmp.Or(strings.Compare(a.Tenant, b.Tenant), strings.Compare(a.Namespace, b.Namespace),
			strings.Compare(a.Stream, b.Stream), cmp.Compare(a.Shard.Shard, b.Shard.Shard))
	})
	for i := 1; i < len(out); i++ {
		if out[i].Shard == out[i-1].Shard {
			return nil, invalid("replica report of %s: shard %s reported twice", id, out[i].Shard)
		}
	}
	return out, nil
}

func sortedOrNil(ids []string) []string {
	if len(ids) == 0 {
		return nil
	}
	return slices.Sorted(slices.Values(ids))
}

func validReport(id string, rep cluster.ReplicaReport) error {
	bad := func(format string, args ...any) error {
		return invalid("replica report of %s for %s: %s", id, rep.Shard, fmt.Sprintf(format, args...))
	}
	switch {
	case rep.Shard.Shard < 0:
		return bad("want a shard >= 0")
	case rep.Leader != id:
		return bad("leader %q is not the reporting member: a member reports the shards it leads", rep.Leader)
	case rep.Term == 0:
		return bad("want a term > 0")
	case len(rep.Voters) == 0:
		return bad("no voters")
	case !slices.Contains(rep.Voters, rep.Leader):
		return bad("the leader is not among the voters %v", rep.Voters)
	}
	seen := map[string]bool{}
	for _, m := range slices.Concat(rep.Voters, rep.Learners) {
		if err := ValidName("member", m); err != nil {
			return bad("%v", err)
		}
		if seen[m] {
			return bad("member %q listed twice among voters and learners", m)
		}
		seen[m] = true
	}
	for i, m := range rep.InSync {
		if !slices.Contains(rep.Voters, m) || slices.Contains(rep.InSync[:i], m) {
			return bad("in_sync %v: want distinct voters", rep.InSync)
		}
	}
	return nil
}
