package cli

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/ctl"
	"github.com/pylon-xds/pylon/internal/grpcrules"
	"github.com/pylon-xds/pylon/internal/route"
	"github.com/pylon-xds/pylon/internal/status"
)

// explainedClient is a gRPC client implementation a call is explained for,
// and how it is known.
type explainedClient struct {
	client grpcrules.Client
	from   string
}

// parseClientFlag reads --client.
func parseClientFlag(name string) (*explainedClient, error) {
	if name == "" {
		return nil, nil
	}
	c, ok := grpcrules.Parse(name)
	if !ok {
		return nil, fmt.Errorf("--client %q: want one of %s", name, strings.Join(grpcrules.Names(), ", "))
	}
	return &explainedClient{c, "given with --client"}, nil
}

// clientsToExplain are the gRPC clients a call of node (nil: a group was
// named) is explained for: the one given; else, on a running Pylon, the
// implementation the node's stream says it is; else the group's
// `clients:`. None when nothing says.
func clientsToExplain(a *adminFlags, given *explainedClient, running bool, node *config.TestNode, groupClients []string) ([]explainedClient, error) {
	if given != nil {
		return []explainedClient{*given}, nil
	}
	if running && node != nil {
		c, err := streamImplementation(a.Client(), node.ID)
		if err != nil {
			return nil, err
		}
		if c != nil {
			return []explainedClient{*c}, nil
		}
	}
	var out []explainedClient
	for _, name := range groupClients {
		if c, ok := grpcrules.Parse(name); ok {
			out = append(out, explainedClient{c, "in the group's clients:"})
		}
	}
	return out, nil
}

// streamImplementation is the gRPC implementation node's stream says it is
// (its user_agent_name, as /proxies/{id} reads it): nil when the node has
// no stream here, or one of Envoy or a client Pylon has no rules of. The
// node's own word, which explain says: it decides nothing served.
func streamImplementation(c adminClient, node string) (*explainedClient, error) {
	var body struct {
		Streams []status.Stream `json:"streams"`
	}
	err := c.Get("/proxies/"+url.PathEscape(node), &body)
	var ae *ctl.APIError
	if errors.As(err, &ae) && ae.Code == http.StatusNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	for _, s := range body.Streams {
		if s.Gone != nil {
			continue
		}
		if cl, ok := grpcrules.Parse(s.Implementation); ok {
			return &explainedClient{cl, fmt.Sprintf("its stream's user agent reads as %s %s, the node's own word", s.Implementation, s.ImplementationVersion)}, nil
		}
	}
	return nil, nil
}

// checkClients adds, to a gRPC call's result, what each client does with
// it.
func checkClients(res *route.Resources, out *route.Result, clients []explainedClient) {
	for _, c := range clients {
		if check := route.CheckClient(res, out, c.client, c.from); check != nil {
			out.GRPCClients = append(out.GRPCClients, check)
		}
	}
}
