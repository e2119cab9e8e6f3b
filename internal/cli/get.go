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

	"github.com/pylon-xds/pylon/internal/status"
)

// resourceKinds maps `pylon get`'s words to the Envoy kinds /config
// groups resources by.
var resourceKinds = map[string]string{
	"clusters": "Cluster", "listeners": "Listener", "routes": "RouteConfiguration",
	"endpoints": "ClusterLoadAssignment", "secrets": "Secret",
}

const getKinds = "proxies, objects, clusters, listeners, routes, endpoints or secrets"

func newGet(a *adminFlags) *cobra.Command {
	var o output
	var group string
	cmd := &cobra.Command{
		Use:   "get proxies|objects|clusters|listeners|routes|endpoints|secrets",
		Short: "List proxies, the stored config objects, or the Envoy resources each group runs (secrets redacted)",
		Long: `List proxies, the stored config objects, or the Envoy resources each group
runs, with the columns that matter (as istioctl proxy-config shows them):
clusters with their type and endpoint and healthy counts, listeners with
their address and where their routes come from, routes per virtual host
with domains, endpoints with health and weight, secrets with the
certificate's expiry (read from the certificate; key material is never
shown). -o json or yaml prints whole resources.`,
		Example: `  pylon get clusters
  pylon get routes --group edge
  pylon get secrets
  pylon get objects -o yaml`,
		Args: func(_ *cobra.Command, args []string) error {
			switch {
			case len(args) == 0:
				return fmt.Errorf("say what to list: %s", getKinds)
			case len(args) > 1:
				return fmt.Errorf("one kind at a time (%s), not %d", getKinds, len(args))
			}
			return nil
		},
		ValidArgs: []string{"proxies", "objects", "clusters", "listeners", "routes", "endpoints", "secrets"},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Check(); err != nil {
				return err
			}
			c := a.Client()
			out := cmd.OutOrStdout()
			switch args[0] {
			case "objects":
				return getObjects(c, out, o)
			case "proxies":
				return getProxies(c, out, o)
			}
			kind := resourceKinds[args[0]]
			if kind == "" {
				return fmt.Errorf("unknown kind %q: %s", args[0], getKinds)
			}
			return getResources(c, out, o, args[0], group)
		},
	}
	o.Register(cmd)
	cmd.Flags().StringVar(&group, "group", "", "only this node group")
	a.CompleteGroupFlag(cmd)
	return cmd
}

// getObjects lists the stored objects; as YAML, the server's own YAML.
func getObjects(c adminClient, out io.Writer, o output) error {
	if o.Format == "yaml" {
		b, err := c.GetRaw("/v1/objects?format=yaml", "")
		if err != nil {
			return err
		}
		_, err = out.Write(b)
		return err
	}
	var objs struct {
		Objects []struct {
			Kind     string    `json:"kind"`
			Name     string    `json:"name"`
			Revision int64     `json:"revision"`
			Expires  time.Time `json:"expires"`
		} `json:"objects"`
	}
	var raw json.RawMessage
	if err := c.Get("/v1/objects", &raw); err != nil {
		return err
	}
	if !o.Table() {
		return render(out, o.Format, raw)
	}
	if err := json.Unmarshal(raw, &objs); err != nil {
		return fmt.Errorf("/v1/objects: %w", err)
	}
	tw := tabwriter.NewWriter(out, 0, 0, 3, ' ', 0)
	fmt.Fprintln(tw, "KIND\tNAME\tREVISION\tEXPIRES")
	for _, ob := range objs.Objects {
		exp := "-"
		if !ob.Expires.IsZero() {
			exp = ob.Expires.Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", ob.Kind, ob.Name, ob.Revision, exp)
	}
	return tw.Flush()
}

func getProxies(c adminClient, out io.Writer, o output) error {
	var raw struct {
		Streams json.RawMessage `json:"streams"`
	}
	if err := c.Get("/proxies", &raw); err != nil {
		return err
	}
	if !o.Table() {
		return render(out, o.Format, raw)
	}
	var streams []status.Stream
	if err := json.Unmarshal(raw.Streams, &streams); err != nil {
		return fmt.Errorf("/proxies: %w", err)
	}
	tw := tabwriter.NewWriter(out, 0, 0, 3, ' ', 0)
	fmt.Fprintln(tw, "NAME\tKIND\tGROUP\tADDRESS\tCLIENT\tCONNECTED")
	for _, s := range streams {
		since := s.Since.Format(time.RFC3339)
		if s.Gone != nil {
			since = "gone " + s.Gone.Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", printable(s.Node), s.Kind, printable(s.Group), printable(s.Peer), printable(s.Client), since)
	}
	return tw.Flush()
}

// configDump is GET /config: each group's resources by kind, as
// protojson (proto field names), redacted by the server.
type configDump struct {
	Groups []groupResources `json:"groups"`
}

type groupResources struct {
	Name      string                       `json:"name"`
	Resources map[string][]json.RawMessage `json:"resources"`
}

// getResources lists one kind of Envoy resource per group. A --group that
// matches no group is an error naming the groups there are: an empty
// table would read as "this group runs nothing".
func getResources(c adminClient, out io.Writer, o output, word, group string) error {
	q := ""
	if group != "" {
		q = "?group=" + url.QueryEscape(group)
	}
	var cfg configDump
	if err := c.Get("/config"+q, &cfg); err != nil {
		return err
	}
	if group != "" && len(cfg.Groups) == 0 {
		return noSuchGroup(c, group)
	}
	kind := resourceKinds[word]
	if !o.Table() {
		sel := map[string][]json.RawMessage{}
		for _, g := range cfg.Groups {
			sel[g.Name] = g.Resources[kind]
		}
		return render(out, o.Format, sel)
	}
	tw := tabwriter.NewWriter(out, 0, 0, 3, ' ', 0)
	t := resourceTables[word]
	fmt.Fprintln(tw, "GROUP\t"+strings.Join(t.header, "\t"))
	for _, g := range cfg.Groups {
		for _, row := range t.rows(g, time.Now()) {
			fmt.Fprintln(tw, g.Name+"\t"+strings.Join(row, "\t"))
		}
	}
	return tw.Flush()
}

// noSuchGroup is the error for a --group that names no group.
func noSuchGroup(c adminClient, group string) error {
	var all configDump
	if err := c.Get("/config", &all); err != nil {
		return fmt.Errorf("no group named %q", group)
	}
	names := make([]string, 0, len(all.Groups))
	for _, g := range all.Groups {
		names = append(names, g.Name)
	}
	sort.Strings(names)
	if len(names) == 0 {
		return fmt.Errorf("no group named %q: the config has no groups", group)
	}
	return fmt.Errorf("no group named %q: the groups are %s", group, strings.Join(names, ", "))
}
