package ctl

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

func printResult(cmd *cobra.Command, res map[string]any) {
	out := cmd.OutOrStdout()
	dry, _ := res["dryRun"].(bool)
	same, _ := res["unchanged"].(bool)
	switch rev, ok := res["revision"].(float64); {
	case dry && same:
		fmt.Fprintln(out, "dry run: no change, nothing would be stored")
	case dry:
		fmt.Fprintln(out, "dry run: nothing stored")
	case same:
		fmt.Fprintln(out, "no change: the store already has this config; no revision made")
	case ok:
		fmt.Fprintf(out, "stored as revision %d\n", int64(rev))
	}
	if v, ok := res["version"].(string); ok && v != "" {
		fmt.Fprintf(out, "fleet version %s\n", v)
	}
	if objs, ok := res["objects"].([]any); ok && len(objs) > 0 {
		fmt.Fprintln(out, "objects:")
		for _, l := range objs {
			fmt.Fprintf(out, "  %v\n", l)
		}
	}
	if changes, ok := res["changes"].(map[string]any); ok {
		for group, lines := range changes {
			fmt.Fprintf(out, "group %s:\n", group)
			for _, l := range lines.([]any) {
				fmt.Fprintf(out, "  %v\n", l)
			}
		}
	}
}

// AddWriteCommands adds the commands that change the config through the
// admin API (apply, delete, endpoints, rollback) and read its history
// (history, diff).
func AddWriteCommands(root *cobra.Command, a *Flags) {
	dry := false
	get := a.Client

	root.AddCommand(newApply(get))

	del := &cobra.Command{
		Use:               "delete KIND NAME",
		Example:           "  pylon delete services api-canary\n  pylon delete resources.Cluster legacy",
		Short:             "Delete an object (services, routes, listeners, secrets, grpc, resources.Cluster, ...)",
		Args:              cobra.ExactArgs(2),
		ValidArgsFunction: a.storedObjects,
		RunE: func(cmd *cobra.Command, args []string) error {
			res, err := get().Do("DELETE", "/v1/objects/"+url.PathEscape(args[0])+"/"+url.PathEscape(args[1]), nil, "")
			if err != nil {
				return err
			}
			printResult(cmd, res)
			return nil
		},
	}

	eps := newEndpoints(get)
	eps.AddCommand(newEndpointsList(a))
	for _, c := range eps.Commands() {
		c.ValidArgsFunction = FirstArg(a.serviceNames)
	}
	root.AddCommand(eps)

	rollback := &cobra.Command{
		Use:     "rollback REV",
		Example: "  pylon rollback 3 --dry-run\n  pylon rollback 3",
		Short:   "Publish the config of a stored revision again, as a new revision",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			q := ""
			if dry {
				q = "?dryRun=true"
			}
			res, err := get().Do("POST", "/v1/rollback/"+url.PathEscape(args[0])+q, nil, "")
			if err != nil {
				return err
			}
			printResult(cmd, res)
			return nil
		},
	}
	rollback.Flags().BoolVar(&dry, "dry-run", false, "show what would change, store nothing")

	root.AddCommand(del, newHistory(a), newDiff(a), rollback)
}

func newApply(client func() Client) *cobra.Command {
	var dry, prune bool
	var file string
	apply := &cobra.Command{
		Use:   "apply FILE",
		Short: "Create or replace the objects of a config document in the embedded store",
		Long: `Stores the objects of a config document (YAML or JSON, named as the
argument or with -f). Objects the document does not name are left as they
are, unless --prune: then the document becomes the whole config of the
kinds it names (services, routes, listeners, secrets, grpc, tests, groups,
and each @type under resources), and what the store has of those kinds
and the document lacks is deleted, in the same single revision. Registered
endpoints are never pruned, but a service deleted (by a prune or by pylon
delete) takes its registered endpoints with it, in the same revision. A
prune of an empty document is refused.`,
		Example: `  pylon apply examples/edge-gateway.yaml --dry-run
  pylon apply -f edge.json
  pylon apply edge.yaml --prune --dry-run`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 1 {
				return fmt.Errorf("apply takes one document FILE, got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			path, err := documentArg(file, args)
			if err != nil {
				return err
			}
			ct, err := documentType(path)
			if err != nil {
				return err
			}
			data, err := readDocument(path)
			if err != nil {
				return err
			}
			// The server names the file in its diagnostics, with each
			// field's line in it.
			q := url.Values{"file": {path}}
			if dry {
				q.Set("dryRun", "true")
			}
			if prune {
				q.Set("prune", "true")
			}
			res, err := client().Do("POST", "/v1/apply?"+q.Encode(), data, ct)
			if err != nil {
				return err
			}
			printResult(cmd, res)
			return nil
		},
	}
	apply.Flags().StringVarP(&file, "filename", "f", "", "the config document (YAML or JSON), if not given as the argument")
	apply.Flags().BoolVar(&dry, "dry-run", false, "validate and show what would change, store nothing")
	apply.Flags().BoolVar(&prune, "prune", false, "delete what the store has of the document's kinds and the document lacks")
	return apply
}

// documentArg is the document apply reads: the argument or -f, exactly
// one of them.
func documentArg(file string, args []string) (string, error) {
	switch {
	case file != "" && len(args) > 0:
		return "", fmt.Errorf("give the document FILE once: as the argument or with -f, not both")
	case file != "":
		return file, nil
	case len(args) == 1:
		return args[0], nil
	}
	return "", fmt.Errorf("apply needs the document FILE: pylon apply FILE (or -f FILE)")
}

// maxDocument bounds a document apply reads: the API's own bound.
const maxDocument = 16 << 20

// documentType is the Content-Type of a config document, by its file's
// extension: the API reads YAML and JSON by Content-Type.
func documentType(path string) (string, error) {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".yaml", ".yml":
		return "application/yaml", nil
	case ".json":
		return "application/json", nil
	}
	return "", fmt.Errorf("%s: a config document is a .yaml, .yml or .json file", path)
}

func readDocument(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxDocument+1))
	if err == nil && len(b) > maxDocument {
		err = fmt.Errorf("%s: over %d MiB, the admin API's limit", path, maxDocument>>20)
	}
	return b, err
}

// endpointRequest is the body of POST /v1/services/{name}/endpoints,
// marshalled (never formatted: an argument cannot add a field). TTL is
// sent whenever --ttl is given, so that the server judges it (0s is
// refused there, not turned into a permanent endpoint here).
type endpointRequest struct {
	Address string  `json:"address"`
	Port    uint32  `json:"port"`
	Weight  uint32  `json:"weight,omitempty"`
	TTL     *string `json:"ttl,omitempty"`
}

// splitEndpoint splits ADDRESS:PORT, an IPv6 address in brackets.
func splitEndpoint(s string) (string, uint32, error) {
	host, portStr, err := net.SplitHostPort(s)
	if err != nil {
		return "", 0, fmt.Errorf("endpoint %q: want ADDRESS:PORT, an IPv6 address in brackets ([::1]:8080): %w", s, err)
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil || port == 0 || host == "" {
		return "", 0, fmt.Errorf("endpoint %q: want ADDRESS:PORT with a port from 1 to 65535", s)
	}
	return host, uint32(port), nil
}

func newEndpoints(client func() Client) *cobra.Command {
	var ttl time.Duration
	var weight uint32
	endpoints := &cobra.Command{Use: "endpoints", Short: "Register, remove or list the endpoints of a service"}
	add := &cobra.Command{
		Use:   "add SERVICE ADDRESS:PORT",
		Short: "Register an endpoint; with --ttl it leaves EDS unless registered again in time",
		Example: `  pylon endpoints add api 10.0.1.21:8080 --ttl 30s
  pylon endpoints add api [2001:db8::7]:8080 --weight 3`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			host, port, err := splitEndpoint(args[1])
			if err != nil {
				return err
			}
			req := endpointRequest{Address: host, Port: port, Weight: weight}
			if cmd.Flags().Changed("ttl") {
				s := ttl.String()
				req.TTL = &s
			}
			body, err := json.Marshal(req)
			if err != nil {
				return err
			}
			res, err := client().Do("POST", "/v1/services/"+url.PathEscape(args[0])+"/endpoints", body, "application/json")
			if err != nil {
				return err
			}
			printResult(cmd, res)
			return nil
		},
	}
	add.Flags().DurationVar(&ttl, "ttl", 0, "lease: the endpoint leaves unless registered again within this (leave out for a permanent endpoint)")
	add.Flags().Uint32Var(&weight, "weight", 0, "load-balancing weight (default 1)")
	remove := &cobra.Command{
		Use:     "remove SERVICE ADDRESS:PORT",
		Short:   "Remove a registered endpoint",
		Example: "  pylon endpoints remove api 10.0.1.21:8080\n  pylon endpoints remove api [::1]:8080",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			host, port, err := splitEndpoint(args[1])
			if err != nil {
				return err
			}
			addr := net.JoinHostPort(host, strconv.FormatUint(uint64(port), 10))
			res, err := client().Do("DELETE", "/v1/services/"+url.PathEscape(args[0])+"/endpoints/"+url.PathEscape(addr), nil, "")
			if err != nil {
				return err
			}
			printResult(cmd, res)
			return nil
		},
	}
	endpoints.AddCommand(add, remove)
	return endpoints
}

// registeredEndpoint is a registration as /v1/objects holds it: kind
// "endpoints.SERVICE", name ADDRESS:PORT.
type registeredEndpoint struct {
	Kind     string `json:"kind"`
	Name     string `json:"name"`
	Revision int64  `json:"revision"`
	Body     struct {
		Weight uint32 `json:"weight"`
		Health string `json:"health"`
	} `json:"body"`
	Expires time.Time `json:"expires"`
}

func newEndpointsList(a *Flags) *cobra.Command {
	var o Output
	cmd := &cobra.Command{
		Use:     "list [SERVICE]",
		Short:   "List the registered endpoints (of one service), with their leases",
		Example: "  pylon endpoints list\n  pylon endpoints list api -o json",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Check(); err != nil {
				return err
			}
			sel, err := registeredEndpoints(a.Client(), args)
			if err != nil {
				return err
			}
			if !o.Table() {
				return Render(cmd.OutOrStdout(), o.Format, map[string]any{"endpoints": sel})
			}
			return endpointTable(cmd.OutOrStdout(), sel)
		},
	}
	o.Register(cmd)
	return cmd
}

// registeredEndpoints are the registrations /v1/objects lists (of the
// services named, if any). Only the endpoint objects are decoded as
// endpoints: the other kinds have bodies of their own shapes (groups' is a
// list).
func registeredEndpoints(c Client, services []string) ([]registeredEndpoint, error) {
	var objs struct {
		Objects []json.RawMessage `json:"objects"`
	}
	if err := c.Get("/v1/objects", &objs); err != nil {
		return nil, err
	}
	var sel []registeredEndpoint
	for _, raw := range objs.Objects {
		var k struct {
			Kind string `json:"kind"`
		}
		if err := json.Unmarshal(raw, &k); err != nil {
			return nil, fmt.Errorf("/v1/objects: %w", err)
		}
		svc, ok := strings.CutPrefix(k.Kind, "endpoints.")
		if !ok || (len(services) > 0 && !slices.Contains(services, svc)) {
			continue
		}
		var e registeredEndpoint
		if err := json.Unmarshal(raw, &e); err != nil {
			return nil, fmt.Errorf("/v1/objects: %s: %w", k.Kind, err)
		}
		sel = append(sel, e)
	}
	return sel, nil
}

func endpointTable(w io.Writer, eps []registeredEndpoint) error {
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	fmt.Fprintln(tw, "SERVICE\tENDPOINT\tWEIGHT\tHEALTH\tEXPIRES\tREVISION")
	for _, e := range eps {
		weight, health, exp := "1", "unknown", "never"
		if e.Body.Weight != 0 {
			weight = strconv.FormatUint(uint64(e.Body.Weight), 10)
		}
		if e.Body.Health != "" {
			health = e.Body.Health
		}
		if !e.Expires.IsZero() {
			exp = e.Expires.Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\n", strings.TrimPrefix(e.Kind, "endpoints."), e.Name, weight, health, exp, e.Revision)
	}
	return tw.Flush()
}

func newHistory(a *Flags) *cobra.Command {
	var o Output
	cmd := &cobra.Command{
		Use:     "history",
		Short:   "List the stored config revisions (endpoint registrations are runtime state, not listed)",
		Example: "  pylon history\n  pylon history -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Check(); err != nil {
				return err
			}
			var raw json.RawMessage
			if err := a.Client().Get("/v1/history", &raw); err != nil {
				return err
			}
			if !o.Table() {
				return Render(cmd.OutOrStdout(), o.Format, raw)
			}
			var h struct {
				History []struct {
					Revision int64     `json:"revision"`
					At       time.Time `json:"at"`
					Summary  string    `json:"summary"`
					Version  string    `json:"version"`
				} `json:"history"`
			}
			if err := json.Unmarshal(raw, &h); err != nil {
				return fmt.Errorf("/v1/history: %w", err)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 3, ' ', 0)
			fmt.Fprintln(tw, "REVISION\tTIME\tVERSION\tCHANGE")
			revs := make([]int64, len(h.History))
			for i, e := range h.History {
				revs[i] = e.Revision
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", e.Revision, e.At.Format(time.RFC3339), e.Version, e.Summary)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if skipped(revs) {
				fmt.Fprintln(cmd.ErrOrStderr(), HistoryGapNote)
			}
			return nil
		},
	}
	o.Register(cmd)
	return cmd
}

// HistoryGapNote says why history's revisions skip numbers: a revision
// counts every write to the store, and the history lists config changes
// only. On stderr, so that stdout stays the table.
const HistoryGapNote = `revisions missing between these entries are writes that are not config changes: endpoint registrations and lease expiries and, with the etcd store, lease renewals, replica status and any other write to the etcd cluster (its revisions are Pylon's, offset). "pylon diff REV1 REV2 --endpoints" shows the registrations between two entries.`

// skipped reports whether revisions, newest first, skip a number between
// two entries.
func skipped(revs []int64) bool {
	for i := 1; i < len(revs); i++ {
		if revs[i-1]-revs[i] > 1 {
			return true
		}
	}
	return false
}

func newDiff(a *Flags) *cobra.Command {
	var o Output
	var withEndpoints bool
	cmd := &cobra.Command{
		Use:   "diff REV [REV2]",
		Short: "Show what changed between two stored revisions as a unified diff of YAML (REV2 defaults to the latest)",
		Long: `Show what changed in the stored config between two revisions, as a unified
diff of the objects as YAML (redacted), REV2 defaulting to the latest.
Registered endpoints are runtime state and, as in the history, left out
unless --endpoints. -o json or yaml prints the API's answer, the diff in it.`,
		Example: "  pylon diff 3\n  pylon diff 3 5\n  pylon diff 3 --endpoints",
		Args:    cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Check(); err != nil {
				return err
			}
			q := url.Values{"from": {args[0]}}
			if len(args) == 2 {
				q.Set("to", args[1])
			}
			if withEndpoints {
				q.Set("endpoints", "true")
			}
			var raw json.RawMessage
			if err := a.Client().Get("/v1/diff?"+q.Encode(), &raw); err != nil {
				return err
			}
			if !o.Table() {
				return Render(cmd.OutOrStdout(), o.Format, raw)
			}
			var d struct {
				Diff string `json:"diff"`
			}
			if err := json.Unmarshal(raw, &d); err != nil {
				return fmt.Errorf("/v1/diff: %w", err)
			}
			_, err := io.WriteString(cmd.OutOrStdout(), d.Diff)
			return err
		},
	}
	o.Register(cmd)
	cmd.Flags().BoolVar(&withEndpoints, "endpoints", false, "include registered endpoints")
	return cmd
}
