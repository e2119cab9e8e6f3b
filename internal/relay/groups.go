package relay

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/pylon-xds/pylon/internal/nodegroup"
)

// Bounds of reading a Pylon upstream's group rules.
const (
	// maxGroupsBody bounds GET /v1/groups's body.
	maxGroupsBody = 1 << 20
	// maxGroupRules bounds the rules kept: as many keys as a relay may
	// hold is plenty.
	maxGroupRules = 10000
	// DefaultGroupsEvery is how often the rules are read again.
	DefaultGroupsEvery = 10 * time.Second
)

// GroupRules reads a Pylon upstream's node group rules (its admin API's
// GET /v1/groups, with the read token) so that the relay keys each proxy
// by the group the upstream would put it in: one upstream stream per
// group. Groups bound to certificate identities are left out: the relay
// cannot prove a downstream proxy's identity upstream (its streams speak
// with its own), so such a group is never relayed, and its proxies are
// keyed as an unverified node would be.
type GroupRules struct {
	// URL is the upstream's admin API, e.g. https://pylon-1:19000.
	URL string
	// Token returns the upstream's read token (read on each request, so a
	// rotated token file is followed).
	Token  func() (string, error)
	Client *http.Client
	Every  time.Duration
	Logger *slog.Logger
	// Kept, when set, is the file the rules last read are kept in, so that
	// a relay restarted while the upstream is away keys new proxies to
	// the keys it kept.
	Kept string

	mu      sync.Mutex
	rules   nodegroup.Groups
	version string
	read    bool
	failing string
	changed chan struct{}
}

// Changed receives a value after the rules read changed (coalesced): the
// relay moves its connected proxies whose group changed.
func (g *GroupRules) Changed() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.changed == nil {
		g.changed = make(chan struct{}, 1)
	}
	return g.changed
}

// Current returns the rules as last read; ok is false before the first
// read succeeded.
func (g *GroupRules) Current() (rules nodegroup.Groups, ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.rules, g.read
}

// Run reads the rules now, then every Every, until ctx ends. A failed read
// keeps the rules read before, and is logged once until one succeeds.
func (g *GroupRules) Run(ctx context.Context) error {
	every := g.Every
	if every <= 0 {
		every = DefaultGroupsEvery
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		g.refresh(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Read reads the rules once (Run does it every period); a relay starting
// reads them before it serves. When it cannot, the rules kept at the last
// read are used until a read succeeds.
func (g *GroupRules) Read(ctx context.Context) error {
	err := g.refresh(ctx)
	if err != nil && g.Kept != "" {
		g.loadKept()
	}
	return err
}

// keptRules is the Kept file.
type keptRules struct {
	Version string           `json:"version"`
	Groups  nodegroup.Groups `json:"groups"`
}

func (g *GroupRules) keep(rules nodegroup.Groups, version string) error {
	b, err := json.Marshal(keptRules{Version: version, Groups: rules})
	if err != nil {
		return err
	}
	return writeAtomic(g.Kept, b)
}

// loadKept takes the kept rules, bounded, unless rules were read.
func (g *GroupRules) loadKept() {
	f, err := os.Open(g.Kept)
	if err != nil {
		return
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxGroupsBody+1))
	var kept keptRules
	if err != nil || len(b) > maxGroupsBody || json.Unmarshal(b, &kept) != nil || len(kept.Groups) > maxGroupRules {
		g.logger().Warn("relay: the kept group rules cannot be read; new proxies wait for the upstream's", "file", g.Kept)
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.read {
		g.rules, g.version, g.read = kept.Groups, kept.Version, true
		g.logger().Info("relay: keying by the group rules kept at the last read, until the upstream's are read", "version", kept.Version, "groups", len(kept.Groups))
	}
}

func (g *GroupRules) logger() *slog.Logger {
	if g.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return g.Logger
}

func (g *GroupRules) refresh(ctx context.Context) error {
	rules, version, err := g.fetch(ctx)
	g.mu.Lock()
	defer g.mu.Unlock()
	log := g.logger()
	if err != nil {
		if ctx.Err() == nil && g.failing != err.Error() {
			log.Warn("relay: cannot read the upstream's group rules; keeping those read before", "url", g.URL, "err", err)
		}
		g.failing = err.Error()
		return err
	}
	if g.failing != "" {
		log.Info("relay: the upstream's group rules are read again", "url", g.URL)
	}
	if version != g.version || !g.read {
		log.Info("relay: the upstream's group rules", "version", version, "groups", len(rules))
		if g.changed != nil {
			select {
			case g.changed <- struct{}{}:
			default:
			}
		}
		if g.Kept != "" {
			if err := g.keep(rules, version); err != nil {
				log.Warn("relay: cannot keep the upstream's group rules in the data folder", "file", g.Kept, "err", err)
			}
		}
	}
	g.rules, g.version, g.read, g.failing = rules, version, true, ""
	return nil
}

// fetch is one bounded GET /v1/groups.
func (g *GroupRules) fetch(ctx context.Context) (nodegroup.Groups, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(g.URL, "/")+"/v1/groups", nil)
	if err != nil {
		return nil, "", err
	}
	tok, err := g.Token()
	if err != nil {
		return nil, "", err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := g.Client.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxGroupsBody+1))
	if err != nil {
		return nil, "", err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, "", fmt.Errorf("GET /v1/groups: %s", resp.Status) // the body may echo what we sent
	}
	if len(b) > maxGroupsBody {
		return nil, "", fmt.Errorf("GET /v1/groups: body past the bound of %d bytes", maxGroupsBody)
	}
	var body nodegroup.Rules
	if err := json.Unmarshal(b, &body); err != nil {
		return nil, "", fmt.Errorf("GET /v1/groups: %w", err)
	}
	if len(body.Groups) > maxGroupRules {
		return nil, "", fmt.Errorf("GET /v1/groups: %d groups, past the bound of %d", len(body.Groups), maxGroupRules)
	}
	var rules nodegroup.Groups
	for _, r := range body.Groups {
		if len(r.Identities) > 0 {
			continue // never relayed: see GroupRules
		}
		if r.Name == "" || len(r.Name) > maxKeyLen {
			return nil, "", fmt.Errorf("GET /v1/groups: a group's name is empty or past %d bytes", maxKeyLen)
		}
		rules = append(rules, nodegroup.Group{Name: r.Name, Match: r.Match, Default: r.Default})
	}
	return rules, body.Version, nil
}

// groupKeyOf is n's key with a Pylon upstream: the group its rules put n
// in. The key announces upstream n's own fields, so that the upstream
// puts the key's stream where it would put n: with the relay's node id
// ID/GROUP when that resolves to the same group, else (a rule matching on
// the node id) n's own id.
func (r *Relay) groupKeyOf(n nodegroup.Node) (Key, error) {
	rules, ok := r.o.Groups.Current()
	if !ok {
		return Key{}, fmt.Errorf("the relay has not read its upstream's group rules yet (%s): node %q waits", r.o.Groups.URL, n.ID)
	}
	n.Identities = nil
	i := rules.Resolve(n)
	if i < 0 {
		return Key{}, fmt.Errorf("node %q is in no group of the upstream's (as the relay read them from %s)", n.ID, r.o.Groups.URL)
	}
	g := rules[i]
	as := n
	as.ID = r.o.ID + "/" + g.Name
	if rules.Resolve(as) != i {
		as.ID = n.ID
	}
	return Key{Name: g.Name, Group: &g, As: &as}, nil
}

// announced is the upstream node of a group key.
func announced(n nodegroup.Node) *corev3.Node {
	out := &corev3.Node{Id: n.ID, Cluster: n.Cluster, UserAgentName: "pylon-relay", ClientFeatures: []string{ttlFeature}}
	if n.Region != "" || n.Zone != "" || n.SubZone != "" {
		out.Locality = &corev3.Locality{Region: n.Region, Zone: n.Zone, SubZone: n.SubZone}
	}
	if len(n.Metadata) > 0 {
		fields := map[string]*structpb.Value{}
		for k, v := range n.Metadata {
			fields[k] = structpb.NewStringValue(v)
		}
		out.Metadata = &structpb.Struct{Fields: fields}
	}
	return out
}

// keyOf is n's key: the upstream's group with GroupRules, else the
// template's.
func (r *Relay) keyOf(n nodegroup.Node) (Key, error) {
	if r.o.Groups != nil {
		return r.groupKeyOf(n)
	}
	return r.o.Template.KeyOf(n)
}

// maxGroupWait bounds how long a group key without its first config holds
// back the groups after it and a change of the rules (applyPending): past
// it (an upstream that never answers the key, a shard refusing it), only
// the groups that would take one of its proxies stay held back.
const maxGroupWait = 5 * time.Second

// waits reports whether ks, without its first config, is within
// maxGroupWait of being made; mu is held.
func (r *Relay) waits(ks *keyState, now time.Time) bool {
	return ks.snap == nil && now.Sub(ks.born) < maxGroupWait
}

// published is the keys in the order their groups are published, with mu
// held, and those not published yet though they have a snapshot. Template
// keys match disjoint fields: by name, none held. Group keys follow the
// upstream's order (first match wins, as upstream); a key whose group a
// node of an earlier key without a snapshot yet could also match is held
// until that key has one, lest the node get the later group's config for
// a while; the default group, until every key has one. Past maxGroupWait
// a key without a snapshot holds back only the groups not published yet
// that would take one of its proxies: those stay in no group, keeping
// what they hold (nothing is sent to them), and get their own group's
// config once it comes.
func (r *Relay) published(now time.Time) ([]*keyState, map[*keyState]bool) {
	names := slices.Sorted(maps.Keys(r.keys))
	order := make([]*keyState, len(names))
	for i, n := range names {
		order[i] = r.keys[n]
	}
	if r.o.Groups == nil {
		return order, nil
	}
	rules, _ := r.o.Groups.Current()
	rank := map[string]int{}
	for i, g := range rules {
		rank[g.Name] = i
	}
	pos := func(ks *keyState) int {
		if i, ok := rank[ks.key.Name]; ok {
			return i
		}
		return len(rules)
	}
	slices.SortStableFunc(order, func(a, b *keyState) int { return pos(a) - pos(b) })
	blocked := map[*keyState]bool{}
	var waiting, late []*keyState
	for _, ks := range order {
		if ks.key.Group == nil {
			continue
		}
		// A group already published stays: taken out for a proxy of a
		// late key, its own proxies would go to a later group's config.
		if ks.key.Group.Default {
			blocked[ks] = len(waiting) > 0 || r.anyWaiting(now) || !ks.showDone && r.anyLate(now)
		} else {
			for _, w := range waiting {
				if !disjoint(w.key.Group.Match, ks.key.Group.Match) {
					blocked[ks] = true
					break
				}
			}
			for _, w := range late {
				blocked[ks] = blocked[ks] || !ks.showDone && takesAMember(ks.key.Group, w)
			}
		}
		switch {
		case ks.snap != nil || ks.key.Group.Default:
		case r.waits(ks, now):
			waiting = append(waiting, ks)
		default:
			late = append(late, ks)
		}
	}
	return order, blocked
}

// takesAMember reports whether g's rule would take one of w's proxies,
// were w's group not in the fleet; mu is held.
func takesAMember(g *nodegroup.Group, w *keyState) bool {
	for m := range w.members {
		if g.Match.Matches(m.node) {
			return true
		}
	}
	return false
}

// anyLate reports whether a non-default group key past maxGroupWait
// without a snapshot has proxies (the default group would take them);
// mu is held.
func (r *Relay) anyLate(now time.Time) bool {
	for _, ks := range r.keys {
		if ks.snap == nil && ks.key.Group != nil && !ks.key.Group.Default && !r.waits(ks, now) && len(ks.members) > 0 {
			return true
		}
	}
	return false
}

// anyWaiting reports whether a non-default group key has no snapshot yet,
// within maxGroupWait; mu is held.
func (r *Relay) anyWaiting(now time.Time) bool {
	for _, ks := range r.keys {
		if ks.key.Group != nil && !ks.key.Group.Default && r.waits(ks, now) {
			return true
		}
	}
	return false
}

// disjoint reports whether no node can match both a and b: a field both
// set to different values, or node id globs whose literal beginnings
// differ. Unsure is not disjoint.
func disjoint(a, b nodegroup.Match) bool {
	differ := func(x, y string) bool { return x != "" && y != "" && x != y }
	if differ(a.Cluster, b.Cluster) || differ(a.Region, b.Region) || differ(a.Zone, b.Zone) || differ(a.SubZone, b.SubZone) {
		return true
	}
	for k, v := range a.Metadata {
		if w, ok := b.Metadata[k]; ok && v != w {
			return true
		}
	}
	if a.ID != "" && b.ID != "" {
		pa, pb := literal(a.ID), literal(b.ID)
		if !strings.HasPrefix(pa, pb) && !strings.HasPrefix(pb, pa) {
			return true
		}
	}
	return false
}

// literal is a glob's beginning before its first special character.
func literal(glob string) string {
	if i := strings.IndexAny(glob, `*?[\`); i >= 0 {
		return glob[:i]
	}
	return glob
}
