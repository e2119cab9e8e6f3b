package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/pylon-xds/pylon/internal/bootstrap"
	"github.com/pylon-xds/pylon/internal/compile"
	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/configstore"
	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/route"
	"github.com/pylon-xds/pylon/internal/source/file"
	"github.com/pylon-xds/pylon/internal/store"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// explainFlags are `pylon explain`'s flags.
type explainFlags struct {
	out        output
	config     string
	node       config.TestNode
	group      string
	locality   string
	metadata   []string
	headers    []string
	port       uint32
	listener   string
	sni        string
	identities []string
	client     string
}

func newExplain(a *adminFlags) *cobra.Command {
	f := &explainFlags{}
	cmd := &cobra.Command{
		Use:   "explain [METHOD] URL",
		Short: "Say where a request would go on a node: listener, filter chain, virtual host, route, clusters and endpoints",
		Long: `Say where a request would go on a node: which listener and filter chain
take it, which virtual host and route match, which cluster or clusters (with
each one's share of a weighted split), the redirect or direct response, and
the endpoints with their locality, priority, health and weight. It follows
Envoy's documented matching rules; for a proxyless gRPC call
(xds:///target/pkg.Service/Method) the api_listener of the target. What it
does not simulate (runtime values, filters that rewrite, ...) is listed as
"not simulated".

The node is put in its group by the config's group rules, exactly as the
server does (--node-id, --cluster, --locality, --metadata, --identity), or the
group is named (--group). The config is the stored one of a running Pylon
(read with the read token and compiled here with the server's code), or
files (--config FILE|FOLDER). Secret files are not read. The route tests of
the config are not run, so a config whose tests fail can be explained.

On a running Pylon, during a staged rollout of the node's group, it says
which version the node runs (new or previous) and why (the stage that
takes it, by selector or node id share), and explains on that version.
For a proxyless gRPC call it flags a route configuration that gRPC
clients reject (NACK) whole, with each reason ("gRPC NACK"), and checks
what the client fetches for the target (listener, routes, clusters,
endpoints) against that client's rules (docs/grpc.md#refusals), saying
what it does with the call: takes it as explained, NACKs a resource,
fails the RPC, crashes. The client is --client; else, on a running Pylon,
the implementation the node's stream says it is (its user agent); else
each of the group's clients:.`,
		Example: `  pylon explain --node-id edge-1 'GET https://shop.example.com/api/cart' -H 'x-canary: 1'
  pylon explain --config ./config/ --group edge http://shop.example.com/ --port 8080 -o json
  pylon explain --node-id app-1 xds:///greeter/helloworld.Greeter/SayHello -H 'x-user: beta'
  pylon explain --config ./config/ --group apps --client grpc-js xds:///greeter/helloworld.Greeter/SayHello`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.out.Check(); err != nil {
				return err
			}
			return runExplain(cmd, a, f, args)
		},
	}
	f.out.Register(cmd)
	fl := cmd.Flags()
	fl.StringVar(&f.config, "config", "", "explain on these config files (file or folder) instead of a running Pylon's stored config")
	fl.StringVar(&f.node.ID, "node-id", "", "the node id the request reaches (its group by the group rules)")
	alias(fl, "node", "node-id")
	fl.StringVar(&f.node.Cluster, "cluster", "", "the node's cluster")
	fl.StringVar(&f.locality, "locality", "", "the node's locality, region[/zone[/sub_zone]]")
	fl.StringArrayVar(&f.metadata, "metadata", nil, "key=value in the node's metadata, repeatable")
	fl.StringArrayVar(&f.identities, "identity", nil, "an identity the node's certificate proves (SPIFFE ID, DNS SAN), repeatable")
	fl.StringVar(&f.group, "group", "", "the node group, instead of a node")
	a.CompleteGroupFlag(cmd)
	fl.StringArrayVarP(&f.headers, "header", "H", nil, `a request header, "name: value", repeatable`)
	fl.Uint32Var(&f.port, "port", 0, "the destination port the connection reaches (default: the URL's port, else 80 or 443)")
	fl.StringVar(&f.listener, "listener", "", "the listener by name, instead of by port")
	fl.StringVar(&f.sni, "sni", "", "the TLS server name (default: the URL's host, for https)")
	fl.StringVar(&f.client, "client", "", "for a gRPC call: the client implementation to check it for, grpc-go, grpc-core or grpc-js (default: the one the node's stream says it is on a running Pylon, else the group's clients:)")
	return cmd
}

// explanation is what -o json and yaml print.
type explanation struct {
	Node    string        `json:"node,omitempty"`
	Group   string        `json:"group"`
	Config  string        `json:"config"`
	Rollout *rolloutNote  `json:"rollout,omitempty"`
	Result  *route.Result `json:"result"`
}

func runExplain(cmd *cobra.Command, a *adminFlags, f *explainFlags, args []string) error {
	req, err := route.ParseRequest(strings.Join(args, " "), f.headers)
	if err != nil {
		return err
	}
	req.Port, req.Listener, req.SNI = f.port, f.listener, f.sni
	given, err := parseClientFlag(f.client)
	if err != nil {
		return err
	}
	if given != nil && !req.GRPC {
		return fmt.Errorf("--client checks a proxyless gRPC call (xds:///TARGET/pkg.Service/Method), not %s", req)
	}
	node, err := f.nodeOf(cmd)
	if err != nil {
		return err
	}
	fleet, where, err := explainFleet(a, f.config)
	if err != nil {
		return err
	}
	g, _, err := compile.GroupOf(fleet, node, f.group)
	if err != nil {
		return err
	}
	_, rule := fleet.Lookup(g.Name)
	resources := route.FromSnapshot(g.Snapshot)
	var staged *rolloutNote
	if f.config == "" {
		// A running Pylon: the node may be outside its rollout's stage.
		if staged, resources, err = explainedVersion(a.Client(), fleet, g, node, resources); err != nil {
			return err
		}
	}
	res, err := route.Explain(resources, req)
	if err != nil {
		return fmt.Errorf("%s (group %s): %w", req, g.Name, err)
	}
	if req.GRPC {
		var stated []string
		if rule != nil {
			stated = rule.Clients
		}
		clients, err := clientsToExplain(a, given, f.config == "", node, stated)
		if err != nil {
			return err
		}
		checkClients(resources, res, clients)
	}
	out := cmd.OutOrStdout()
	if !f.out.Table() {
		return render(out, f.out.Format, explanation{Node: f.node.ID, Group: g.Name, Config: where, Rollout: staged, Result: res})
	}
	return explainText(out, f.node.ID, g.Name, where, staged, res)
}

// nodeOf is the node the flags describe, nil when none is given.
func (f *explainFlags) nodeOf(cmd *cobra.Command) (*config.TestNode, error) {
	given := f.node.ID != "" || f.node.Cluster != "" || f.locality != "" || len(f.metadata) > 0 || len(f.identities) > 0
	if !given {
		return nil, nil
	}
	if f.node.ID == "" {
		return nil, fmt.Errorf("--cluster, --locality, --metadata and --identity describe a node: give its --node-id too")
	}
	n := f.node
	if cmd.Flags().Changed("locality") {
		l, err := bootstrap.ParseLocality(f.locality)
		if err != nil {
			return nil, fmt.Errorf("--locality: %w", err)
		}
		n.Region, n.Zone, n.SubZone = l.Region, l.Zone, l.SubZone
	}
	md, err := bootstrap.ParseMetadata(f.metadata)
	if err != nil {
		return nil, fmt.Errorf("--metadata: %w", err)
	}
	n.Metadata, n.Identities = md, f.identities
	return &n, nil
}

func explainText(w io.Writer, node, group, where string, staged *rolloutNote, res *route.Result) error {
	var head [][2]string
	if node != "" {
		head = append(head, [2]string{"node", fmt.Sprintf("%q in group %q", node, group)})
	} else {
		head = append(head, [2]string{"group", fmt.Sprintf("%q", group)})
	}
	head = append(head, [2]string{"config", where})
	if r := staged; r != nil {
		state := ""
		if r.Halted != "" {
			state = " (halted: " + printable(r.Halted) + ")"
		}
		runs := "this node runs the " + r.Version + " version"
		if r.Version == "either" {
			runs = "a node of it runs either version"
		} else if r.Runs != "" {
			runs += " " + r.Runs
		}
		head = append(head,
			[2]string{"rollout", fmt.Sprintf("group %q at stage %d of %d%s: %s", r.Group, r.Stage, r.Stages, state, runs)},
			[2]string{"  because", r.Why})
	}
	return route.WriteTextAfter(w, head, res)
}

// placeholder stands for the contents of a secret file: explain needs the
// secret to exist, never its key material.
func placeholder(string) ([]byte, error) { return []byte("not read by pylon explain"), nil }

// explainFleet compiles the config to explain on: the files given, or the
// stored objects of the running Pylon. It says which in a line.
func explainFleet(a *adminFlags, path string) (*fleet.Fleet, string, error) {
	reg := xdstype.New()
	if path != "" {
		files, err := file.Read(path)
		if err != nil {
			return nil, "", err
		}
		fleet, err := compile.CompileSkippingTests(reg, files, placeholder)
		if err != nil {
			return nil, "", fmt.Errorf("config refused:\n%w", err)
		}
		return fleet, "files " + path, nil
	}
	objs, rev, err := storedObjects(a.Client())
	if err != nil {
		return nil, "", err
	}
	files, err := configstore.Files(objs, time.Now())
	if err != nil {
		return nil, "", err
	}
	fleet, err := compile.CompileSkippingTests(reg, files, placeholder)
	if err != nil {
		return nil, "", fmt.Errorf("the stored config (revision %d) does not compile here:\n%w", rev, err)
	}
	return fleet, fmt.Sprintf("stored revision %d at %s", rev, a.Addr), nil
}

// storedObjects reads the stored objects over the admin API. Raw Secrets
// come redacted (their key material no longer decodes): each is replaced
// with an empty Secret of its name, which is all routing needs of it.
func storedObjects(c adminClient) ([]store.Object, int64, error) {
	var list struct {
		Revision int64 `json:"revision"`
		Objects  []struct {
			store.Key
			Body    json.RawMessage `json:"body"`
			Expires time.Time       `json:"expires"`
		} `json:"objects"`
	}
	if err := c.Get("/v1/objects", &list); err != nil {
		if strings.Contains(err.Error(), "file mode") {
			return nil, 0, fmt.Errorf("%w\nthis Pylon serves config files: give them with --config", err)
		}
		return nil, 0, err
	}
	objs := make([]store.Object, 0, len(list.Objects))
	for _, o := range list.Objects {
		body := []byte(o.Body)
		if o.Kind == "resources.Secret" {
			body, _ = json.Marshal(map[string]string{"@type": xdstype.SecretURL, "name": o.Name})
		}
		objs = append(objs, store.Object{Key: o.Key, Body: body, Expires: o.Expires})
	}
	return objs, list.Revision, nil
}
