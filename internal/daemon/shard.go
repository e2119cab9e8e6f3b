package daemon

import (
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/fleetstatus"
	"github.com/pylon-xds/pylon/internal/metrics"
	"github.com/pylon-xds/pylon/internal/xds"
)

// ReplicaOptions are how replicas share a fleet beyond the store: load
// balancing among the replicas of a shard, and the shard itself (the node
// groups a replica set serves). Both read the other replicas' summaries
// (fleetstatus), so with the bolt store or a config file there is nothing
// to balance, and a refused node is told no shard serving it is known.
type ReplicaOptions struct {
	// Balance, with the etcd store, refuses new streams over this
	// replica's share of its shard's streams and sheds the excess (see
	// xds.Balance). The CLI's default is on.
	Balance bool
	// ShedRate bounds the streams shed a second (0: xds.DefaultShedRate).
	ShedRate float64
	// Groups are the node groups this replica serves (`--groups`); nil:
	// every group. The others are not compiled, and their nodes refused.
	Groups fleet.Selector
}

// shardName is the shard shown with this replica's proxies: "" for every
// group.
func shardName(o Options) string {
	if o.Replicas.Groups == nil {
		return ""
	}
	return o.Replicas.Groups.String()
}

// checkReplicas refuses a negative shed rate.
func checkReplicas(o Options) error {
	if o.Replicas.ShedRate < 0 {
		return fmt.Errorf("--shed-rate %v: must be 0 (the default, %d a second) or more", o.Replicas.ShedRate, xds.DefaultShedRate)
	}
	return nil
}

// replicaXDS is what balancing and sharding add to the xDS server's
// options; fl is nil without the etcd store.
func replicaXDS(o Options, fl *fleetstatus.Fleet, met *metrics.Metrics) (*xds.Balance, *xds.Shard) {
	var bal *xds.Balance
	if fl != nil && o.Replicas.Balance {
		bal = &xds.Balance{Load: fl.Load, ShedRate: o.Replicas.ShedRate, Report: met}
	}
	sh := &xds.Shard{Groups: o.Replicas.Groups}
	if fl != nil {
		sh.ServedBy = func(group string) []xds.ShardPeer {
			var out []xds.ShardPeer
			for _, p := range fl.ServedBy(group) {
				out = append(out, xds.ShardPeer{Replica: p.Replica, Groups: fleet.Selector(p.Groups).String(), XDS: p.XDS})
			}
			return out
		}
	}
	return bal, sh
}

// selfOf is what this replica publishes of itself: its groups and where
// its xDS port is. A listener on every address is named by this host's
// name, which other replicas' clients are more likely to reach.
func selfOf(o Options, xdsLis net.Listener) fleetstatus.Self {
	addr := xdsLis.Addr().String()
	if host, port, err := net.SplitHostPort(addr); err == nil {
		if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
			if name, err := os.Hostname(); err == nil && name != "" && !strings.ContainsAny(name, " /") {
				addr = net.JoinHostPort(name, port)
			}
		}
	}
	return fleetstatus.Self{Groups: o.Replicas.Groups, XDS: addr}
}
