package controlplane

import (
	"encoding/base64"
	"encoding/json"
	"strings"

	"github.com/felixmq/felix/auth"
)

// clusterNeeds maps the cluster actions onto Felix permissions (see needs):
//   - cluster.view (members, placement): any valid token of any tenant.
//     The token's own tid, read before verification, only chooses whose
//     keys verify it; the signature decides.
//   - cluster.node (register, keepalive, leave): the cluster.node
//     permission (a node credential) or admin, in the operator tenant.
//   - cluster.node.mint on cluster:nodes/{subject}: an operator admin, or a
//     node credential of that same subject renewing itself.
//   - cluster.manage (moving a replica or a preferred leader): an
//     operator admin.
//
// Without an operator tenant only the bootstrap token registers brokers.
func (a *FelixTokenAuthorizer) clusterNeeds(action, resource, tok string) []need {
	op := a.operator
	switch action {
	case ActionClusterView:
		return []need{{tenant: unverifiedTenant(tok)}}
	case ActionClusterNode:
		if op != "" {
			return []need{{tenant: op, action: auth.ActionClusterNode, resource: op + "/cluster/node"}}
		}
	case ActionClusterManage:
		if op != "" {
			return []need{{tenant: op, action: auth.ActionAdmin, resource: op + "/*/*"}}
		}
	case ActionNodeMint:
		if op != "" {
			subject, _ := strings.CutPrefix(resource, "cluster:nodes/")
			return []need{
				{tenant: op, action: auth.ActionAdmin, resource: op + "/*/*"},
				{tenant: op, action: auth.ActionClusterNode, resource: op + "/cluster/node", subject: subject},
			}
		}
	}
	return nil
}

// unverifiedTenant reads a JWT's tid claim without verifying anything, or
// "" if the token is not a JWT with one (verification then refuses it).
func unverifiedTenant(tok string) string {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return ""
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return ""
	}
	var c struct {
		Tenant string `json:"tid"`
	}
	if json.Unmarshal(raw, &c) != nil {
		return ""
	}
	return c.Tenant
}
