package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/pylon-xds/pylon/internal/xdstype"
)

// The shards: each serves the groups its prefix names.
var shardNames = [2]string{"a", "b"}

// groupName is the i-th group of shard s.
func groupName(s string, i int) string { return fmt.Sprintf("%s-%03d", s, i) }

// maxObjects is the most objects one apply writes: etcd takes at most
// 128 operations in a transaction (its --max-txn-ops), and a commit
// needs one per object and a few more.
const maxObjects = 100

// shardDocs is the config of the shard scenario, its services in applies
// of at most maxObjects objects: per shard, perShard groups, each matching the node
// ids it prefixes and scoped to services of its own, so that what a
// replica builds follows its groups. The services go first: a group's
// scope must match something.
func shardDocs(perShard, services, endpoints int) []string {
	var docs []string
	var b strings.Builder
	objects := 0
	add := func(head, obj string) {
		if objects == maxObjects {
			docs, objects = append(docs, b.String()), 0
			b.Reset()
		}
		if objects == 0 {
			b.WriteString(head)
		}
		b.WriteString(obj)
		objects++
	}
	n := 0
	for _, s := range shardNames {
		for i := range perShard {
			for j := range services {
				var o strings.Builder
				fmt.Fprintf(&o, "- name: %s-s%03d\n  endpoints:\n", groupName(s, i), j)
				for k := range endpoints {
					fmt.Fprintf(&o, "  - { address: 10.%d.%d.%d, port: 8080 }\n", n>>8&255, n&255, k&255)
				}
				add("services:\n", o.String())
				n++
			}
		}
	}
	// The group rules are one object (their order decides), applied
	// last, whole.
	docs = append(docs, b.String())
	b.Reset()
	b.WriteString("groups:\n")
	for _, s := range shardNames {
		for i := range perShard {
			g := groupName(s, i)
			fmt.Fprintf(&b, "- name: %s\n  match: { id: \"%s-*\" }\n  scope: { services: [\"%s-*\"] }\n", g, g, g)
		}
	}
	return append(docs, b.String())
}

// applyAll applies docs in order through r and returns the last version.
func applyAll(ctx context.Context, r *replica, docs []string) (last written, size int, err error) {
	for _, doc := range docs {
		if last, err = r.apply(ctx, doc); err != nil {
			return written{}, 0, err
		}
		size += len(doc)
	}
	return last, size, nil
}

// shardEnv is the shard scenario's replicas: two per shard, and one
// serving every group to compare with.
type shardEnv struct {
	shards [2][2]*replica
	all    *replica
	// none serves no group of the config (--groups none): it decodes
	// the whole config as every replica does and builds nothing, the
	// baseline against which a replica's share is measured.
	none *replica
	// writer takes the writes (it serves no group either): a write is
	// checked whole where it lands, and what that check keeps would
	// otherwise count against the replica measured.
	writer *replica
	every  []*replica
}

func startShards(ctx context.Context, e *env) (*shardEnv, error) {
	var ids []string
	var flags [][]string
	for _, name := range shardNames {
		for j := range 2 {
			ids = append(ids, fmt.Sprintf("%s-%d", name, j+1))
			flags = append(flags, []string{"--groups", name + "-*"})
		}
	}
	ids = append(ids, "all-1", "none-1", "writer-1")
	flags = append(flags, nil, []string{"--groups", "none"}, []string{"--groups", "none"})
	rs, err := e.startAll(ctx, ids, flags)
	if err != nil {
		return nil, err
	}
	s := &shardEnv{all: rs[4], none: rs[5], writer: rs[6], every: rs[:6]}
	s.shards = [2][2]*replica{{rs[0], rs[1]}, {rs[2], rs[3]}}
	return s, nil
}

// runShard is issue 33's sharding must-show: two shards of two replicas
// on one etcd and c.groups groups, half each; a replica of every group
// beside them, same config, same run; each replica's heap after a forced
// collection and its RSS, empty, configured, and with its proxies; a
// proxy of shard a refused by shard b naming a; `pylon status` on every
// replica listing every shard's proxies.
func runShard(ctx context.Context, c config, w io.Writer) (bool, error) {
	e, err := newEnv(ctx, c.pylon, c.flags)
	if err != nil {
		return false, err
	}
	defer e.close()
	s, err := startShards(ctx, e)
	if err != nil {
		return false, err
	}
	mem := newMemTable(s.every)
	if err := mem.sample(ctx, "empty"); err != nil {
		return false, err
	}
	perShard := c.groups / 2
	version, size, err := applyAll(ctx, s.writer, shardDocs(perShard, c.services, c.endpoints))
	if err != nil {
		return false, err
	}
	if err := waitPublished(ctx, append(s.every, s.writer), version, c.groups, c.connectBound); err != nil {
		return false, err
	}
	if err := mem.sample(ctx, "configured"); err != nil {
		return false, err
	}
	specs, counts := shardFleet(c, s)
	cpu0 := cpuOf(s.every)
	f := startFleet(ctx, specs, c.perConn, c.ramp)
	defer f.stop()
	took, ok := f.waitReady(ctx, c.connectBound)
	cpu := cpuOf(s.every) - cpu0
	fmt.Fprintf(w, "%d groups (%d services of %d endpoints each, %d KiB of YAML); %d proxies on each shard's two replicas and %d on all-1: all configured in %v: %v\n",
		c.groups, c.services, c.endpoints, size>>10, counts[0], counts[2], took.Round(time.Millisecond), ok)
	if !ok {
		return false, fmt.Errorf("%d of %d proxies configured within %v: %s", f.view().ready, len(specs), c.connectBound, f.notReady())
	}
	fmt.Fprintf(w, "connecting: %d B received per proxy, replicas' CPU %.2f s (%.0f µs per proxy)\n",
		f.tally().bytes/len(specs), cpu, cpu/float64(len(specs))*1e6)
	if err := mem.sample(ctx, "with proxies"); err != nil {
		return false, err
	}
	mem.print(w, s.every, f)
	checks := []check{mem.check(s, c.groups)}
	checks = append(checks, refusals(ctx, s)...)
	checks = append(checks, statusLists(ctx, s, counts))
	checks = append(checks, check{f.tally().lost == 0, fmt.Sprintf("no proxy lost its config (%d losses)", f.tally().lost)})
	return report(w, checks), nil
}

// shardFleet is c.proxies proxies spread over the groups, each on its
// shard's two replicas, and as many again (ids ending -all) on all-1;
// counts are the proxies of shard a, b and all-1.
func shardFleet(c config, s *shardEnv) ([]proxySpec, [3]int) {
	var counts [3]int
	rrs := [2]*roundRobin{newRoundRobin(s.shards[0][0].xdsAddr, s.shards[0][1].xdsAddr), newRoundRobin(s.shards[1][0].xdsAddr, s.shards[1][1].xdsAddr)}
	all := newRoundRobin(s.all.xdsAddr)
	perShard := c.groups / 2
	var specs, mirror []proxySpec
	// Grouped by group, so that a connection's proxies are one group's,
	// as a node agent's would be.
	for i := range c.proxies {
		shard, g := i%2, (i/2)%perShard
		grp := groupName(shardNames[shard], g)
		id := fmt.Sprintf("%s-p%05d", grp, i)
		specs = append(specs, proxySpec{id: id, cluster: "scale", delta: i%4 < 2, want: c.services, rr: rrs[shard]})
		mirror = append(mirror, proxySpec{id: id + "-all", cluster: "scale", delta: i%4 < 2, want: c.services, rr: all})
		counts[shard]++
		counts[2]++
	}
	sortByRR(specs)
	return append(specs, mirror...), counts
}

// sortByRR orders specs by shard, so that the proxies sharing a
// connection share its balancer.
func sortByRR(specs []proxySpec) {
	var a, b []proxySpec
	for _, s := range specs {
		if strings.HasPrefix(s.id, shardNames[0]+"-") {
			a = append(a, s)
		} else {
			b = append(b, s)
		}
	}
	copy(specs, append(a, b...))
}

// check is one pass criterion and what was measured for it.
type check struct {
	ok   bool
	what string
}

func report(w io.Writer, checks []check) bool {
	ok := true
	for _, ch := range checks {
		word := "PASS"
		if !ch.ok {
			word, ok = "FAIL", false
		}
		fmt.Fprintf(w, "%s %s\n", word, ch.what)
	}
	return ok
}

// refusals opens a stream of each shard's group on the other shard: it
// must end FAILED_PRECONDITION naming the shard that serves it. A replica
// names the shards it read live in etcd: it is asked again, for up to
// refusalBound, while it names none, and how many tries it took is shown.
func refusals(ctx context.Context, s *shardEnv) []check {
	const refusalBound = 20 * time.Second
	var out []check
	for i, name := range shardNames {
		other := s.shards[1-i][0]
		node := groupName(name, 0) + "-probe"
		deadline := time.Now().Add(refusalBound)
		var err error
		var first string
		tries := 0
		for {
			tries++
			err = probe(ctx, other.xdsAddr, node)
			if named(err, name) || time.Now().After(deadline) || ctx.Err() != nil {
				break
			}
			if first == "" {
				first = fmt.Sprintf(" (the first try: %v; %s's /status partial: %q)", err, other.id, other.partial(ctx))
			}
			time.Sleep(time.Second) // another process's view of etcd: polled
		}
		out = append(out, check{named(err, name), fmt.Sprintf("%s on %s refused naming shard %s, try %d: %v%s", node, other.id, name, tries, err, first)})
	}
	return out
}

// named reports whether err is a refusal naming a replica of shard name.
func named(err error, name string) bool {
	msg := grpcstatus.Convert(err).Message()
	return grpcstatus.Code(err) == codes.FailedPrecondition &&
		strings.Contains(msg, fmt.Sprintf("serves it (--groups %s-*)", name)) &&
		(strings.Contains(msg, "replica "+name+"-1") || strings.Contains(msg, "replica "+name+"-2"))
}

// probe opens a SotW stream for node on addr and returns how it ended,
// within requestBound.
func probe(ctx context.Context, addr, node string) error {
	ctx, cancel := context.WithTimeout(ctx, requestBound)
	defer cancel()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	p := newProxy(node, "scale", false, 0, nil)
	cs, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	if err != nil {
		return err
	}
	if err := cs.Send(&discoveryv3.DiscoveryRequest{Node: p.node(), TypeUrl: xdstype.ClusterURL}); err != nil {
		return err
	}
	for range 10 {
		if _, err = cs.Recv(); err != nil {
			return err
		}
	}
	return fmt.Errorf("10 responses and no refusal")
}

// statusLists runs `pylon status` on every replica until each lists
// every shard's proxies (the fleet status is published every few
// seconds), within statusBound.
func statusLists(ctx context.Context, s *shardEnv, counts [3]int) check {
	const statusBound = 60 * time.Second
	deadline := time.Now().Add(statusBound)
	var last string
	for _, r := range s.every {
		for {
			out, err := r.cli(ctx, "status")
			got := statusCounts(out)
			last = fmt.Sprintf("pylon status on %s: rows of shard a %d, b %d, all-1 %d (want %d, %d, %d); err %v", r.id, got[0], got[1], got[2], counts[0], counts[1], counts[2], err)
			if err == nil && got == counts {
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return check{false, last}
			}
			time.Sleep(time.Second) // the summaries are published every few seconds
		}
	}
	return check{true, fmt.Sprintf("pylon status on each of the %d replicas lists every shard's proxies (%d, %d and %d rows)", len(s.every), counts[0], counts[1], counts[2])}
}

// statusCounts counts pylon status's rows by the REPLICA column: shard
// a's replicas, shard b's, and all-1's.
func statusCounts(out string) [3]int {
	var n [3]int
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 0:
		case strings.Contains(line, "[a-*]"):
			n[0]++
		case strings.Contains(line, "[b-*]"):
			n[1]++
		case strings.HasSuffix(f[0], "-all") && strings.Contains(line, " all-1 "):
			n[2]++
		}
	}
	return n
}
