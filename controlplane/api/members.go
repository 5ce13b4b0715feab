package api

import "github.com/felixmq/felix/cluster"

// The bodies of membership and placement (GET /v1/placement answers a
// cluster.Placement); docs/cluster.md has the rules.

// RegisterRequest is the body of POST /v1/members.
type RegisterRequest struct {
	ID        string `json:"id"`
	QUICAddr  string `json:"quic_addr"`
	AdminAddr string `json:"admin_addr,omitempty"`
	// Zone is the broker's failure domain (cluster.Member.Zone); empty:
	// none.
	Zone string `json:"zone,omitempty"`
}

// RegisterResponse answers POST /v1/members.
type RegisterResponse struct {
	Member     cluster.Member `json:"member"`
	LeaseTTLMS int64          `json:"lease_ttl_ms"`
}

// KeepAliveRequest is the optional body of POST /v1/members/{id}/keepalive:
// the broker's observed load, replacing its previous report ([] reports
// that it owns nothing busy). An empty body (brokers before load reports),
// no "load" or null reports nothing and keeps the previous report.
//
// Replicas likewise replaces the broker's replica report: one entry per
// replicated shard it leads ([]: it leads none); absent or null keeps the
// previous one.
type KeepAliveRequest struct {
	Load     []cluster.ShardLoad     `json:"load"`
	Replicas []cluster.ReplicaReport `json:"replicas"`
}

// MoveRequest is the body of POST /v1/shards/{tenant}/{namespace}/
// {stream}/{shard}/move: the replica on member From moves to member To.
type MoveRequest struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// LeaderRequest is the body of POST /v1/shards/{tenant}/{namespace}/
// {stream}/{shard}/leader: member To becomes the preferred leader.
type LeaderRequest struct {
	To string `json:"to"`
}

// ShardChangeResponse answers a move or leader change: the shard's
// assignment as stored, and the placement version that stored it.
type ShardChangeResponse struct {
	Version    int64              `json:"version"`
	Assignment cluster.Assignment `json:"assignment"`
}

// KeepAliveResponse answers POST /v1/members/{id}/keepalive.
type KeepAliveResponse struct {
	LeaseTTLMS int64 `json:"lease_ttl_ms"`
}

// LeaveResponse answers DELETE /v1/members/{id}.
type LeaveResponse struct {
	ID string `json:"id"`
}

// MembersResponse answers GET /v1/members.
type MembersResponse struct {
	Members []cluster.Member `json:"members"`
}
