package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/spf13/cobra"

	"github.com/pylon-xds/pylon/internal/ctl"
	"github.com/pylon-xds/pylon/internal/pipeline"
	"github.com/pylon-xds/pylon/internal/source"
	"github.com/pylon-xds/pylon/internal/status"
)

// The columns of `pylon status`, in istioctl proxy-status order.
var statusTypes = []string{"CDS", "LDS", "EDS", "RDS", "SDS"}

// notSubscribed is a type's cell for a proxy that does not subscribe to
// it (a proxyless gRPC client never asks for Secrets): nothing is owed, so
// it is not NOT SENT.
const notSubscribed = "-"

// subscribes reports whether a stream subscribes to t: a type it never
// asked for has no entry, and one it unsubscribed from everything of
// (no wildcard, no names) and was never sent owes nothing either.
func subscribes(t *status.Type) bool {
	sub := t.Subscription
	empty := sub != nil && !sub.Wildcard && len(sub.Names) == 0 && sub.Dropped == 0
	return !empty || t.Sent != nil || t.LastNACK != nil
}

// proxyRow merges a node's open streams into one row: the streams of one
// node id and one verified identity (a stream without a certificate that
// claims a certified node's id gets its own row, not the node's states).
type proxyRow struct {
	node, group string
	identity    string
	replicas    []string // serving its streams, in order met
	states      map[string]string
	nacks       []string
}

// fleetStream is a stream of /proxies with the replica serving it (with
// several replicas on etcd, /proxies on any lists every replica's).
type fleetStream struct {
	Replica string `json:"replica"`
	// Shard is the groups that replica serves, when it serves some only.
	Shard string `json:"shard"`
	// Stale: another replica's stream as last read from etcd, AgeSeconds
	// ago; etcd cannot be read now, so its state is unknown.
	Stale      bool    `json:"stale"`
	AgeSeconds float64 `json:"ageSeconds"`
	status.Stream
}

// unknown is a type's cell for a stream whose state is not known now:
// another replica's, last read from etcd before etcd became unreachable.
const unknown = "UNKNOWN"

// servedBy is the REPLICA column's name for s's replica: with how old it
// is when its state is not known now.
func servedBy(s fleetStream) string {
	by := s.Replica
	if s.Shard != "" {
		by += " [" + printable(s.Shard) + "]"
	}
	if !s.Stale {
		return by
	}
	return fmt.Sprintf("%s (as of %s ago)", by, age(s.AgeSeconds))
}

func age(seconds float64) time.Duration {
	return time.Duration(seconds * float64(time.Second)).Round(time.Second)
}

func rows(streams []fleetStream) []*proxyRow {
	byNode := map[string]*proxyRow{}
	var order []string
	for _, s := range streams {
		if s.Gone != nil {
			continue
		}
		key := s.Node + "\x00" + s.Identity
		r := byNode[key]
		if r == nil {
			r = &proxyRow{node: s.Node, group: s.Group, identity: s.Identity, states: map[string]string{}}
			byNode[key] = r
			order = append(order, key)
		}
		if by := servedBy(s); !slices.Contains(r.replicas, by) {
			r.replicas = append(r.replicas, by)
		}
		for _, t := range s.Types {
			if !subscribes(t) {
				continue
			}
			if s.Stale {
				// A fresh stream of the node (it moved here) says more.
				if r.states[t.Type] == "" {
					r.states[t.Type] = unknown
				}
				continue
			}
			r.states[t.Type] = t.State
			if t.State == status.Nacked && t.LastNACK != nil {
				r.nacks = append(r.nacks, fmt.Sprintf("%s %s rejected version %s: %s", printable(s.Node), t.Type, t.LastNACK.Version, printable(t.LastNACK.Detail)))
			}
		}
	}
	sort.Strings(order)
	out := make([]*proxyRow, len(order))
	for i, n := range order {
		out[i] = byNode[n]
	}
	return out
}

func newStatus(a *adminFlags) *cobra.Command {
	var o output
	cmd := &cobra.Command{
		Use:   "status [PROXY]",
		Short: "Show a refused config, then every proxy's sync state per type; or one proxy in detail",
		Long: `Without an argument: first, if the last config change was refused, when and
why (the previous config keeps serving); then a table of the connected
proxies: per type SYNCED (holds the latest of what it subscribes to), STALE
(not yet ACKed), NACKED (rejected it; the reasons follow the table),
NOT SENT (nothing to send, or a proxy in no group), - (the proxy does
not subscribe to the type: a proxyless gRPC client never asks for
Secrets) or UNKNOWN (another replica's proxy while etcd cannot be read:
PARTIAL heads the table, and REPLICA says how old the last state read
is). With a node id: its
streams, per type what was sent, ACKed and rejected and when, and the
difference between what it has and what it should run.`,
		Example: `  pylon status
  pylon status edge-1
  pylon status -o yaml`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: ctl.FirstArg(a.NodeIDs),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Check(); err != nil {
				return err
			}
			c := a.Client()
			out := cmd.OutOrStdout()
			if len(args) == 1 {
				return proxyDetail(c, out, args[0], o)
			}
			return fleetStatus(c, out, o)
		},
	}
	o.Register(cmd)
	return cmd
}

// statusBody is the part of GET /status the CLI reads.
type statusBody struct {
	Config   pipeline.Status `json:"config"`
	Degraded bool            `json:"degraded"`
	Reason   string          `json:"reason"`
	Sources  source.Status   `json:"sources"`
	// ClientWarnings name groups whose connected gRPC clients their
	// `clients:` does not state.
	ClientWarnings []string `json:"clientWarnings"`
}

func fleetStatus(c adminClient, out io.Writer, o output) error {
	var st statusBody
	var rawStatus json.RawMessage
	if err := c.Get("/status", &rawStatus); err != nil {
		return err
	}
	if err := json.Unmarshal(rawStatus, &st); err != nil {
		return fmt.Errorf("/status: %w", err)
	}
	var proxies struct {
		Streams []fleetStream `json:"streams"`
	}
	var rawProxies struct {
		Streams json.RawMessage `json:"streams"`
		Partial string          `json:"partial"`
		Relays  json.RawMessage `json:"relays"`
	}
	if err := c.Get("/proxies", &rawProxies); err != nil {
		return err
	}
	if !o.Table() {
		v := map[string]any{"status": rawStatus, "streams": rawProxies.Streams}
		if rawProxies.Partial != "" {
			v["partial"] = rawProxies.Partial
		}
		if len(rawProxies.Relays) > 0 {
			v["relays"] = rawProxies.Relays
		}
		return render(out, o.Format, v)
	}
	if err := json.Unmarshal(rawProxies.Streams, &proxies.Streams); err != nil {
		return fmt.Errorf("/proxies: %w", err)
	}
	if st.Degraded {
		// First: this replica cannot reach its store, so what it shows
		// may be behind the fleet's config and writes are refused.
		fmt.Fprintf(out, "DEGRADED: %s\n  still serving the last good config; writes are refused until the store is back\n", st.Reason)
	}
	writeSources(out, st.Sources)
	writeServing(out, st.Config)
	writeRefusal(out, st.Config)
	writeWarnings(out, st.Config)
	writeClientWarnings(out, st)
	if rawProxies.Partial != "" {
		// Proxies of other replicas may be missing or out of date.
		fmt.Fprintf(out, "PARTIAL: %s\n", rawProxies.Partial)
		if anyStale(proxies.Streams) {
			fmt.Fprintf(out, "  other replicas' proxies show %s: their state as last read is in pylon status -o json\n", unknown)
		}
		fmt.Fprintln(out)
	}
	if err := proxyTable(out, st.Config, proxies.Streams); err != nil {
		return err
	}
	var relays []relayKeys
	if len(rawProxies.Relays) > 0 {
		if err := json.Unmarshal(rawProxies.Relays, &relays); err != nil {
			return fmt.Errorf("/proxies relays: %w", err)
		}
	}
	return relaysTable(out, relays)
}

// writeServing names the source's revision being served (a Git commit),
// when the source has one; a refusal names it instead.
func writeServing(out io.Writer, cfg pipeline.Status) {
	if cfg.Revision == "" || cfg.Refused != nil {
		return
	}
	fmt.Fprintf(out, "Serving revision %s (config version %s).\n\n", printable(cfg.Revision), cfg.Version)
}

// revisionNote is " (revision REV)", or "" without one.
func revisionNote(rev string) string {
	if rev == "" {
		return ""
	}
	return " (revision " + printable(rev) + ")"
}

func anyStale(streams []fleetStream) bool {
	return slices.ContainsFunc(streams, func(s fleetStream) bool { return s.Stale })
}

// writeRefusal heads the status with a refused config, the one thing an
// operator must not miss: the fleet still runs the previous config.
func writeRefusal(out io.Writer, cfg pipeline.Status) {
	r := cfg.Refused
	if r == nil {
		if cfg.Version == "" {
			fmt.Fprintln(out, "No config published yet.")
			fmt.Fprintln(out)
		}
		return
	}
	serving := "nothing (no config was ever published)"
	if cfg.Version != "" {
		serving = "the previous config, version " + cfg.Version + revisionNote(cfg.Revision)
	}
	fmt.Fprintf(out, "CONFIG REFUSED at %s%s: still serving %s\n", r.At.Format(time.RFC3339), revisionNote(r.Revision), serving)
	if len(r.Diagnostics) == 0 {
		for _, l := range strings.Split(strings.TrimSpace(r.Error), "\n") {
			fmt.Fprintf(out, "  %s\n", l)
		}
	}
	for _, d := range r.Diagnostics {
		fmt.Fprintf(out, "  %s\n", d)
	}
	if more := r.DiagnosticsTotal - len(r.Diagnostics); more > 0 {
		fmt.Fprintf(out, "  ... and %d more\n", more)
	}
	fmt.Fprintln(out)
}

// writeWarnings lists what the served config was accepted with but an
// operator should hear of (a route to a cluster with no endpoints).
// The server keeps the first pipeline.MaxWarnings and their count.
func writeWarnings(out io.Writer, cfg pipeline.Status) {
	if len(cfg.Warnings) == 0 {
		return
	}
	total := max(cfg.WarningsTotal, len(cfg.Warnings))
	plural := ""
	if total > 1 {
		plural = "S"
	}
	fmt.Fprintf(out, "%d CONFIG WARNING%s (version %s is served):\n", total, plural, cfg.Version)
	for _, d := range cfg.Warnings {
		fmt.Fprintf(out, "  %s\n", d)
	}
	if more := total - len(cfg.Warnings); more > 0 {
		fmt.Fprintf(out, "  ... and %d more warnings (the first %d are shown)\n", more, len(cfg.Warnings))
	}
	fmt.Fprintln(out)
}

// writeClientWarnings lists the groups whose connected proxyless gRPC
// clients their `clients:` does not state: what the proxies connected now
// say they are, not the config.
func writeClientWarnings(out io.Writer, st statusBody) {
	if len(st.ClientWarnings) == 0 {
		return
	}
	plural := ""
	if len(st.ClientWarnings) > 1 {
		plural = "S"
	}
	fmt.Fprintf(out, "%d CLIENT WARNING%s (proxies connected now):\n", len(st.ClientWarnings), plural)
	for _, w := range st.ClientWarnings {
		fmt.Fprintf(out, "  %s\n", printable(w))
	}
	fmt.Fprintln(out)
}

func proxyTable(out io.Writer, cfg pipeline.Status, streams []fleetStream) error {
	versions := map[string]string{}
	for _, g := range cfg.Groups {
		versions[g.Name] = g.Version
	}
	tw := tabwriter.NewWriter(out, 0, 0, 3, ' ', 0)
	fmt.Fprintln(tw, "NAME\tGROUP\t"+strings.Join(statusTypes, "\t")+"\tREPLICA\tVERSION")
	var nacks []string
	all := rows(streams)
	for _, r := range all {
		name := printable(r.node)
		if r.identity != "" {
			name += " (" + printable(r.identity) + ")"
		}
		cells := []string{name, r.group}
		for _, t := range statusTypes {
			s := r.states[t]
			switch {
			case s == "":
				s = notSubscribed
			case r.group == status.NoGroup:
				s = status.NotSent
			}
			cells = append(cells, s)
		}
		cells = append(cells, strings.Join(r.replicas, ","), versions[r.group])
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
		nacks = append(nacks, r.nacks...)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(all) == 0 {
		fmt.Fprintln(out, "No proxy connected: give one a bootstrap (pylon bootstrap --node-id ID) pointing at this Pylon's xDS address.")
	}
	if len(nacks) > 0 {
		fmt.Fprintln(out)
		for _, n := range nacks {
			fmt.Fprintln(out, n)
		}
	}
	refusedStreams(out, streams)
	return nil
}

// refusedStreams lists the streams Pylon ended on purpose (a certificate
// for another node, a stalled client, a flood), which the table of open
// streams would otherwise hide.
func refusedStreams(out io.Writer, streams []fleetStream) {
	first := true
	for _, s := range streams {
		if s.Refused == nil {
			continue
		}
		if first {
			fmt.Fprintln(out)
			first = false
		}
		fmt.Fprintf(out, "%s refused at %s (%s): %s\n", printable(s.Node), s.Refused.At.Format(time.RFC3339), s.Refused.Reason, printable(s.Refused.Detail))
	}
}

// printable escapes what a terminal would interpret (control characters,
// escape sequences) in text a client chose: node ids, NACK details.
func printable(s string) string {
	if strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) < 0 {
		return s
	}
	q := strconv.QuoteToGraphic(s)
	return q[1 : len(q)-1]
}

// proxyDump mirrors the admin API's /proxies/{id}.
type proxyDump struct {
	fleetStream
	LastSent map[string][]json.RawMessage `json:"lastSent"`
}

func proxyDetail(c adminClient, out io.Writer, id string, o output) error {
	var body struct {
		Streams []proxyDump `json:"streams"`
	}
	var raw json.RawMessage
	if err := c.Get("/proxies/"+url.PathEscape(id), &raw); err != nil {
		return err
	}
	if !o.Table() {
		return render(out, o.Format, raw)
	}
	if err := json.Unmarshal(raw, &body); err != nil {
		return fmt.Errorf("/proxies/%s: %w", id, err)
	}
	for _, s := range body.Streams {
		fmt.Fprintf(out, "%s  stream %d  %s  group %s  replica %s\n", printable(s.Node), s.ID, s.Kind, s.Group, s.Replica)
		identity := s.Identity
		if identity == "" {
			identity = "none (no verified client certificate)"
		}
		fmt.Fprintf(out, "  address %s  client %s  identity %s  connected %s\n", s.Peer, printable(s.Client), printable(identity), s.Since.Format(time.RFC3339))
		if s.Gone != nil {
			fmt.Fprintf(out, "  disconnected %s\n", s.Gone.Format(time.RFC3339))
		}
		if s.Stale {
			fmt.Fprintf(out, "  state as last read from etcd %s ago: etcd cannot be read now, and it may no longer hold\n", age(s.AgeSeconds))
		}
		if s.Refused != nil {
			fmt.Fprintf(out, "  refused (%s): %s\n", s.Refused.Reason, printable(s.Refused.Detail))
		}
		var cfg struct {
			Groups []struct {
				Name      string                       `json:"name"`
				Resources map[string][]json.RawMessage `json:"resources"`
			} `json:"groups"`
		}
		if s.Group != status.NoGroup {
			if err := c.Get("/config?group="+url.QueryEscape(s.Group), &cfg); err != nil {
				return err
			}
		}
		for _, t := range s.Types {
			fmt.Fprintf(out, "  %-4s %-8s", t.Type, t.State)
			if t.Sent != nil {
				fmt.Fprintf(out, "  sent %s (nonce %s) %s", t.Sent.Version, t.Sent.Nonce, t.Sent.At.Format(time.TimeOnly))
			}
			if t.ACKed != nil {
				fmt.Fprintf(out, "  acked %s %s", t.ACKed.Version, t.ACKed.At.Format(time.TimeOnly))
			}
			if t.Expected != "" && (t.ACKed == nil || t.ACKed.Version != t.Expected) {
				fmt.Fprintf(out, "  should run %s", t.Expected)
			}
			fmt.Fprintln(out)
			if n := t.LastNACK; n != nil {
				fmt.Fprintf(out, "       last NACK of %s at %s: %s\n", n.Version, n.At.Format(time.TimeOnly), printable(n.Detail))
			}
			if t.State != status.Synced && len(cfg.Groups) == 1 {
				full := fullState[t.Type] && !strings.HasSuffix(s.Kind, "delta")
				for _, line := range diff(s.LastSent[t.Type], cfg.Groups[0].Resources[kindOf(t.Type)], full, t.Subscription) {
					fmt.Fprintf(out, "       %s\n", line)
				}
			}
		}
	}
	return nil
}

var kinds = map[string]string{
	"CDS": "Cluster", "EDS": "ClusterLoadAssignment", "LDS": "Listener", "RDS": "RouteConfiguration",
	"SDS": "Secret", "RTDS": "Runtime", "ECDS": "TypedExtensionConfig", "SRDS": "ScopedRouteConfiguration", "VHDS": "VirtualHost",
}

func kindOf(abbrev string) string { return kinds[abbrev] }

// fullState are the types whose state-of-the-world response carries the
// whole subscribed set (Listeners and Clusters); of the others, and of a
// delta stream's, a response carries only some, so a resource it was
// never sent may be one it has or does not want.
var fullState = map[string]bool{"CDS": true, "LDS": true}

// diff compares what a proxy was last sent with what its group should run,
// by resource name: "+" it lacks (only when full, and only of what sub
// subscribes to: a proxyless gRPC client asks for its own clusters by
// name, and the group's others are not owed to it), "~" differs. (Names
// it holds that are gone are not shown: a delta response lists only what
// changed.)
func diff(sent, want []json.RawMessage, full bool, sub *status.Subscription) []string {
	name := func(raw json.RawMessage) string {
		var m struct {
			Name        string `json:"name"`
			ClusterName string `json:"cluster_name"`
		}
		_ = json.Unmarshal(raw, &m)
		if m.Name != "" {
			return m.Name
		}
		return m.ClusterName
	}
	have := map[string]string{}
	for _, r := range sent {
		have[name(r)] = string(r)
	}
	var out []string
	for _, r := range want {
		n := name(r)
		switch got, ok := have[n]; {
		case !ok && full && wants(sub, n):
			out = append(out, "+ "+n+" (not yet sent)")
		case !ok:
		case got != string(r):
			out = append(out, "~ "+n+" (differs from what was sent)")
		}
	}
	sort.Strings(out)
	return out
}

// wants reports whether sub subscribes to name: by the wildcard, or by
// name (nil: the stream's subscription was not told, so everything).
func wants(sub *status.Subscription, name string) bool {
	if sub == nil || sub.Wildcard {
		return true
	}
	_, found := slices.BinarySearch(sub.Names, name)
	return found
}

// writeSources heads the status with each Kubernetes cluster that is
// away: the fleet gets its endpoints as they were when it last answered.
func writeSources(out io.Writer, st source.Status) {
	for _, c := range st.Kubernetes {
		if c.Connected && c.Degraded {
			fmt.Fprintf(out, "KUBERNETES CLUSTER %s DEGRADED since %s: lists or watches refused: %s\n", printable(c.Name), c.LastErrorAt.UTC().Format(time.RFC3339), printable(c.LastError))
			fmt.Fprintf(out, "  still serving its last services and endpoints\n\n")
		}
		if c.Connected {
			continue
		}
		fmt.Fprintf(out, "KUBERNETES CLUSTER %s UNREACHABLE since %s: %s\n", printable(c.Name), c.Since.UTC().Format(time.RFC3339), printable(c.LastError))
		asOf := "never listed"
		if !c.LastContact.IsZero() {
			asOf = "as of " + c.LastContact.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(out, "  still serving its last services and endpoints (%s)\n\n", asOf)
	}
}
