package xds

import (
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"

	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/xds/guard"
)

// RefusedOtherShard: the node's group is one this replica does not serve
// (`pylon serve --groups`): another shard serves it.
const RefusedOtherShard = "other_shard"

// Shard is what a replica serving some node groups says of the others
// (Options.Shard). Which groups it serves is the fleet's (fleet.Group's
// Unserved, from compile); this names the shard that serves a group.
type Shard struct {
	// Groups are this replica's (--groups), for the refusal's message.
	Groups fleet.Selector
	// ServedBy returns the live replicas that serve group: their names,
	// --groups and xDS addresses (fleetstatus.Fleet.ServedBy); none when
	// none does, or it is not known.
	ServedBy func(group string) []ShardPeer
}

// ShardPeer is another replica serving a group.
type ShardPeer struct {
	Replica string
	Groups  string
	XDS     string
}

// maxNamedShards bounds the replicas a refusal names.
const maxNamedShards = 3

// checkShard ends an open stream whose node a config change moved to a
// group this replica does not serve.
func (st *stream) checkShard() error {
	if g := st.group; g != nil && g.Unserved {
		return st.refuseShard(g, st.node.GetId())
	}
	return nil
}

// refuseShard refuses the stream of node, in group g, which this replica
// does not serve, naming the replicas that do. Their xDS addresses go
// only to a client whose certificate is verified: another client may
// claim any node, and would otherwise learn, group by group, where every
// shard listens.
func (st *stream) refuseShard(g *fleet.Group, node string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "node %q is in group %q, which this replica does not serve", bounded(node, maxLogged), g.Name)
	sh := st.srv.opts.Shard
	if sh != nil {
		fmt.Fprintf(&b, " (it serves --groups %s)", sh.Groups)
	}
	var peers []ShardPeer
	if sh != nil && sh.ServedBy != nil {
		peers = sh.ServedBy(g.Name)
	}
	if len(peers) == 0 {
		b.WriteString("; no live replica is known to serve it")
	}
	for i, p := range peers {
		if i == maxNamedShards {
			fmt.Fprintf(&b, "; and %d more", len(peers)-i)
			break
		}
		fmt.Fprintf(&b, "; replica %s serves it (--groups %s)", p.Replica, p.Groups)
		if st.ident.Verified() && p.XDS != "" {
			fmt.Fprintf(&b, " at %s", p.XDS)
		}
	}
	st.srv.closeWhenIdle(st.tconn, guard.ConnOtherShard)
	return refuse(RefusedOtherShard, codes.FailedPrecondition, "%s", b.String())
}
