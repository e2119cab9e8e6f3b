package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/pylon-xds/pylon/internal/pipeline"
	"github.com/pylon-xds/pylon/internal/status"
)

// The columns of `pylon status`, in istioctl proxy-status order.
var statusTypes = []string{"CDS", "LDS", "EDS", "RDS", "SDS"}

// proxyRow merges a node's open streams into one row.
type proxyRow struct {
	node, group string
	states      map[string]string
	nacks       []string
}

func rows(streams []status.Stream) []*proxyRow {
	byNode := map[string]*proxyRow{}
	var order []string
	for _, s := range streams {
		if s.Gone != nil {
			continue
		}
		r := byNode[s.Node]
		if r == nil {
			r = &proxyRow{node: s.Node, group: s.Group, states: map[string]string{}}
			byNode[s.Node] = r
			order = append(order, s.Node)
		}
		for _, t := range s.Types {
			r.states[t.Type] = t.State
			if t.State == status.Nacked && t.LastNACK != nil {
				r.nacks = append(r.nacks, fmt.Sprintf("%s %s rejected version %s: %s", s.Node, t.Type, t.LastNACK.Version, t.LastNACK.Detail))
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
	cmd := &cobra.Command{
		Use:   "status [PROXY]",
		Short: "Show every proxy's sync state per type, or one proxy in detail",
		Long: `Without an argument, a table of the connected proxies: per type SYNCED (ACKed
the latest for its group), STALE (not yet ACKed), NACKED (rejected it; the
reasons follow the table) or NOT SENT (nothing to send, or a proxy in no
group). With a node id: its streams, per type what was sent, ACKed and
rejected and when, and the difference between what it has and what it
should run.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c := a.client()
			out := cmd.OutOrStdout()
			if len(args) == 1 {
				return proxyDetail(c, out, args[0])
			}
			var proxies struct {
				Streams []status.Stream `json:"streams"`
			}
			if err := c.get("/proxies", &proxies); err != nil {
				return err
			}
			var st struct {
				Config pipeline.Status `json:"config"`
			}
			if err := c.get("/status", &st); err != nil {
				return err
			}
			versions := map[string]string{}
			for _, g := range st.Config.Groups {
				versions[g.Name] = g.Version
			}
			tw := tabwriter.NewWriter(out, 0, 0, 3, ' ', 0)
			fmt.Fprintln(tw, "NAME\tGROUP\t"+strings.Join(statusTypes, "\t")+"\tVERSION")
			var nacks []string
			for _, r := range rows(proxies.Streams) {
				cells := []string{r.node, r.group}
				for _, t := range statusTypes {
					s := r.states[t]
					if s == "" || r.group == status.NoGroup {
						s = status.NotSent
					}
					cells = append(cells, s)
				}
				cells = append(cells, versions[r.group])
				fmt.Fprintln(tw, strings.Join(cells, "\t"))
				nacks = append(nacks, r.nacks...)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if len(nacks) > 0 {
				fmt.Fprintln(out)
				for _, n := range nacks {
					fmt.Fprintln(out, n)
				}
			}
			return nil
		},
	}
	return cmd
}

// proxyDump mirrors the admin API's /proxies/{id}.
type proxyDump struct {
	status.Stream
	LastSent map[string][]json.RawMessage `json:"lastSent"`
}

func proxyDetail(c adminClient, out io.Writer, id string) error {
	var body struct {
		Streams []proxyDump `json:"streams"`
	}
	if err := c.get("/proxies/"+url.PathEscape(id), &body); err != nil {
		return err
	}
	for _, s := range body.Streams {
		fmt.Fprintf(out, "%s  stream %d  %s  group %s\n", s.Node, s.ID, s.Kind, s.Group)
		fmt.Fprintf(out, "  address %s  client %s  connected %s\n", s.Peer, s.Client, s.Since.Format(time.RFC3339))
		if s.Gone != nil {
			fmt.Fprintf(out, "  disconnected %s\n", s.Gone.Format(time.RFC3339))
		}
		var cfg struct {
			Groups []struct {
				Name      string                       `json:"name"`
				Resources map[string][]json.RawMessage `json:"resources"`
			} `json:"groups"`
		}
		if s.Group != status.NoGroup {
			if err := c.get("/config?group="+url.QueryEscape(s.Group), &cfg); err != nil {
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
				fmt.Fprintf(out, "       last NACK of %s at %s: %s\n", n.Version, n.At.Format(time.TimeOnly), n.Detail)
			}
			if t.State != status.Synced && len(cfg.Groups) == 1 {
				for _, line := range diff(s.LastSent[t.Type], cfg.Groups[0].Resources[kindOf(t.Type)]) {
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

// diff compares what a proxy was last sent with what its group should run,
// by resource name: "+" it lacks, "~" differs. (Names it holds that are
// gone are not shown: a delta response lists only what changed.)
func diff(sent, want []json.RawMessage) []string {
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
		case !ok:
			out = append(out, "+ "+n+" (not yet sent)")
		case got != string(r):
			out = append(out, "~ "+n+" (differs from what was sent)")
		}
	}
	sort.Strings(out)
	return out
}

func newGet(a *adminFlags) *cobra.Command {
	var output, group string
	cmd := &cobra.Command{
		Use:   "get proxies|objects|clusters|listeners|routes|endpoints|secrets",
		Short: "List proxies, the stored config objects, or the Envoy resources each group runs (secrets redacted)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c := a.client()
			out := cmd.OutOrStdout()
			if args[0] == "objects" {
				var objs struct {
					Objects []struct {
						Kind     string          `json:"kind"`
						Name     string          `json:"name"`
						Revision int64           `json:"revision"`
						Body     json.RawMessage `json:"body"`
					} `json:"objects"`
				}
				if err := c.get("/v1/objects", &objs); err != nil {
					return err
				}
				if output != "" {
					return render(out, output, objs)
				}
				tw := tabwriter.NewWriter(out, 0, 0, 3, ' ', 0)
				fmt.Fprintln(tw, "KIND\tNAME\tREVISION")
				for _, o := range objs.Objects {
					fmt.Fprintf(tw, "%s\t%s\t%d\n", o.Kind, o.Name, o.Revision)
				}
				return tw.Flush()
			}
			if args[0] == "proxies" {
				var proxies struct {
					Streams []status.Stream `json:"streams"`
				}
				if err := c.get("/proxies", &proxies); err != nil {
					return err
				}
				if output != "" {
					return render(out, output, proxies)
				}
				tw := tabwriter.NewWriter(out, 0, 0, 3, ' ', 0)
				fmt.Fprintln(tw, "NAME\tKIND\tGROUP\tADDRESS\tCLIENT\tCONNECTED")
				for _, s := range proxies.Streams {
					since := s.Since.Format(time.RFC3339)
					if s.Gone != nil {
						since = "gone " + s.Gone.Format(time.RFC3339)
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", s.Node, s.Kind, s.Group, s.Peer, s.Client, since)
				}
				return tw.Flush()
			}
			kind := map[string]string{"clusters": "Cluster", "listeners": "Listener", "routes": "RouteConfiguration", "endpoints": "ClusterLoadAssignment", "secrets": "Secret"}[args[0]]
			if kind == "" {
				return fmt.Errorf("unknown kind %q: proxies, objects, clusters, listeners, routes, endpoints or secrets", args[0])
			}
			q := ""
			if group != "" {
				q = "?group=" + url.QueryEscape(group)
			}
			var cfg struct {
				Groups []struct {
					Name      string                       `json:"name"`
					Resources map[string][]json.RawMessage `json:"resources"`
				} `json:"groups"`
			}
			if err := c.get("/config"+q, &cfg); err != nil {
				return err
			}
			if output != "" {
				sel := map[string][]json.RawMessage{}
				for _, g := range cfg.Groups {
					sel[g.Name] = g.Resources[kind]
				}
				return render(out, output, sel)
			}
			tw := tabwriter.NewWriter(out, 0, 0, 3, ' ', 0)
			fmt.Fprintln(tw, "GROUP\tNAME")
			for _, g := range cfg.Groups {
				for _, r := range g.Resources[kind] {
					var m struct {
						Name        string `json:"name"`
						ClusterName string `json:"cluster_name"`
					}
					_ = json.Unmarshal(r, &m)
					fmt.Fprintf(tw, "%s\t%s%s\n", g.Name, m.Name, m.ClusterName)
				}
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "print whole resources: yaml or json")
	cmd.Flags().StringVar(&group, "group", "", "only this node group")
	return cmd
}

func render(w io.Writer, format string, v any) error {
	js, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	switch format {
	case "json":
		_, err = fmt.Fprintln(w, string(js))
	case "yaml":
		var y []byte
		if y, err = yaml.JSONToYAML(js); err == nil {
			_, err = w.Write(y)
		}
	default:
		err = fmt.Errorf("-o %q: want yaml or json", format)
	}
	return err
}
