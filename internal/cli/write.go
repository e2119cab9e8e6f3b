package cli

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"
)

func printResult(cmd *cobra.Command, res map[string]any) {
	out := cmd.OutOrStdout()
	if dry, _ := res["dryRun"].(bool); dry {
		fmt.Fprintln(out, "dry run: nothing stored")
	} else if rev, ok := res["revision"].(float64); ok {
		fmt.Fprintf(out, "stored as revision %d\n", int64(rev))
	}
	if v, ok := res["version"].(string); ok {
		fmt.Fprintf(out, "fleet version %s\n", v)
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

func addWriteCommands(root *cobra.Command, a *adminFlags) {
	dry := false
	get := a.client

	apply := &cobra.Command{
		Use:   "apply -f FILE",
		Short: "Create or replace the objects of a config document in the embedded store",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path, _ := cmd.Flags().GetString("filename")
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			q := ""
			if dry {
				q = "?dryRun=true"
			}
			res, err := get().do("POST", "/v1/apply"+q, data)
			if err != nil {
				return err
			}
			printResult(cmd, res)
			return nil
		},
	}
	apply.Flags().StringP("filename", "f", "", "the config document (YAML or JSON)")
	apply.Flags().BoolVar(&dry, "dry-run", false, "validate and show what would change, store nothing")
	_ = apply.MarkFlagRequired("filename")

	del := &cobra.Command{
		Use:   "delete KIND NAME",
		Short: "Delete an object (services, routes, listeners, secrets, grpc, resources.Cluster, ...)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			res, err := get().do("DELETE", "/v1/objects/"+url.PathEscape(args[0])+"/"+url.PathEscape(args[1]), nil)
			if err != nil {
				return err
			}
			printResult(cmd, res)
			return nil
		},
	}

	var ttl time.Duration
	var weight uint32
	endpoints := &cobra.Command{Use: "endpoints", Short: "Register or remove endpoints of a service"}
	add := &cobra.Command{
		Use:   "add SERVICE ADDRESS:PORT",
		Short: "Register an endpoint; with --ttl it leaves EDS unless registered again in time",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			host, port, ok := strings.Cut(args[1], ":")
			if !ok {
				return fmt.Errorf("the endpoint is ADDRESS:PORT")
			}
			body := fmt.Sprintf(`{"address":%q,"port":%s,"weight":%d}`, host, port, weight)
			if ttl > 0 {
				body = strings.TrimSuffix(body, "}") + fmt.Sprintf(`,"ttl":%q}`, ttl.String())
			}
			res, err := get().do("POST", "/v1/services/"+url.PathEscape(args[0])+"/endpoints", []byte(body))
			if err != nil {
				return err
			}
			printResult(cmd, res)
			return nil
		},
	}
	add.Flags().DurationVar(&ttl, "ttl", 0, "lease: the endpoint leaves unless registered again within this")
	add.Flags().Uint32Var(&weight, "weight", 0, "load-balancing weight (default 1)")
	remove := &cobra.Command{
		Use:   "remove SERVICE ADDRESS:PORT",
		Short: "Remove a registered endpoint",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			res, err := get().do("DELETE", "/v1/services/"+url.PathEscape(args[0])+"/endpoints/"+url.PathEscape(args[1]), nil)
			if err != nil {
				return err
			}
			printResult(cmd, res)
			return nil
		},
	}
	endpoints.AddCommand(add, remove)

	history := &cobra.Command{
		Use:   "history",
		Short: "List the stored config revisions",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var h struct {
				History []struct {
					Revision int64     `json:"revision"`
					At       time.Time `json:"at"`
					Summary  string    `json:"summary"`
					Version  string    `json:"version"`
				} `json:"history"`
			}
			if err := a.client().get("/v1/history", &h); err != nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 3, ' ', 0)
			fmt.Fprintln(tw, "REVISION\tTIME\tVERSION\tCHANGE")
			for _, e := range h.History {
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", e.Revision, e.At.Format(time.RFC3339), e.Version, e.Summary)
			}
			return tw.Flush()
		},
	}

	diffCmd := &cobra.Command{
		Use:   "diff REV [REV]",
		Short: "Show what changed between two stored revisions (the second defaults to the latest)",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c := a.client()
			objects := func(rev string) (map[string]string, error) {
				var e struct {
					Objects []struct {
						Kind, Name string
						Body       json.RawMessage
					} `json:"objects"`
				}
				path := "/v1/history/" + url.PathEscape(rev)
				if rev == "" {
					path = "/v1/objects"
				}
				if err := c.get(path, &e); err != nil {
					return nil, err
				}
				out := map[string]string{}
				for _, o := range e.Objects {
					y, _ := yaml.JSONToYAML(o.Body)
					out[o.Kind+"/"+o.Name] = string(y)
				}
				return out, nil
			}
			to := ""
			if len(args) == 2 {
				to = args[1]
			}
			a, err := objects(args[0])
			if err != nil {
				return err
			}
			b, err := objects(to)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			for _, k := range sortedKeys(a, b) {
				switch {
				case a[k] == b[k]:
				case a[k] == "":
					fmt.Fprintf(out, "+ %s\n%s", k, indent(b[k], "+   "))
				case b[k] == "":
					fmt.Fprintf(out, "- %s\n", k)
				default:
					fmt.Fprintf(out, "~ %s\n%s%s", k, indent(a[k], "-   "), indent(b[k], "+   "))
				}
			}
			return nil
		},
	}

	rollback := &cobra.Command{
		Use:   "rollback REV",
		Short: "Publish the config of a stored revision again, as a new revision",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			q := ""
			if dry {
				q = "?dryRun=true"
			}
			res, err := get().do("POST", "/v1/rollback/"+url.PathEscape(args[0])+q, nil)
			if err != nil {
				return err
			}
			printResult(cmd, res)
			return nil
		},
	}
	rollback.Flags().BoolVar(&dry, "dry-run", false, "show what would change, store nothing")

	root.AddCommand(apply, del, endpoints, history, diffCmd, rollback)
}

func sortedKeys(ms ...map[string]string) []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range ms {
		for k := range m {
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	sortStrings(out)
	return out
}

func indent(s, prefix string) string {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		b.WriteString(prefix + l + "\n")
	}
	return b.String()
}
