package compile

import (
	"fmt"

	"github.com/pylon-xds/pylon/internal/diag"
	"github.com/pylon-xds/pylon/internal/grpcrules"
	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// grpcClientChecks checks what each group of proxyless gRPC clients would
// receive against what its clients accept (grpcrules), raw resources and
// the model's alike. A resource several groups share is reported once,
// naming the first group that would refuse it.
type grpcClientChecks struct {
	where    func(typeURL, name string) *xdstype.Resource
	reported map[[4]string]bool // type, name, field, rule
}

// grpcTypes are the types gRPC clients read rules of.
var grpcTypes = []string{xdstype.ListenerURL, xdstype.RouteURL, xdstype.ClusterURL, xdstype.EndpointURL}

func (c *grpcClientChecks) check(s *snapshot.Snapshot, group string, names []string) diag.List {
	if len(names) == 0 {
		return nil
	}
	clients := make([]grpcrules.Client, 0, len(names))
	for _, n := range names {
		if cl, ok := grpcrules.Parse(n); ok {
			clients = append(clients, cl)
		}
	}
	if c.reported == nil {
		c.reported = map[[4]string]bool{}
	}
	var problems diag.List
	for _, url := range grpcTypes {
		set := s.Set(url)
		for _, name := range set.Names() {
			for _, p := range grpcrules.Check(set.Get(name).Message, clients) {
				key := [4]string{url, name, p.Field, p.Rule.ID}
				if c.reported[key] {
					continue
				}
				c.reported[key] = true
				problems = append(problems, c.diagnostic(set.Type().Kind, url, name, group, p))
			}
		}
	}
	return problems
}

func (c *grpcClientChecks) diagnostic(kind, url, name, group string, p grpcrules.Problem) diag.Diagnostic {
	effect := map[grpcrules.Effect]string{
		grpcrules.NACK:     "NACK it",
		grpcrules.Unusable: "accept it and fail RPCs",
		grpcrules.Crash:    "crash on it",
		grpcrules.Ignored:  "accept it and ignore it",
	}[p.Rule.Effect]
	clients := make([]string, len(p.Clients))
	for i, c := range p.Clients {
		clients[i] = string(c)
	}
	d := diag.Diagnostic{Type: kind, Name: name, Field: p.Field,
		Message: fmt.Sprintf("%s of group %q would %s: %s (rule %s)", grpcrules.ClientList(p.Clients), group, effect, p.Message, p.Rule.ID),
		Refusal: &diag.Refusal{Clients: clients, Group: group, Rule: p.Rule.ID, Effect: string(p.Rule.Effect), Detail: p.Message}}
	if in := c.where(url, name); in != nil {
		d.File, d.Line = in.File, in.Line
	}
	return d
}
