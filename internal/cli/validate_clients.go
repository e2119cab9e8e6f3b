package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/pylon-xds/pylon/internal/diag"
	"github.com/pylon-xds/pylon/internal/grpcrules"
	"github.com/pylon-xds/pylon/internal/route"
)

// validateResult is what `pylon validate -o json` prints: the version and
// groups of a config that passes, or its problems, those of the groups'
// gRPC clients listed per client.
type validateResult struct {
	OK         bool              `json:"ok"`
	Version    string            `json:"version,omitempty"`
	Warnings   []string          `json:"warnings,omitempty"`
	Groups     []validatedGroup  `json:"groups,omitempty"`
	RouteTests int               `json:"routeTests,omitempty"`
	Problems   []diag.Diagnostic `json:"problems,omitempty"`
	Clients    []clientRefusals  `json:"clients,omitempty"`
}

type validatedGroup struct {
	Name      string `json:"name"`
	Resources int    `json:"resources"`
	Version   string `json:"version"`
}

// clientRefusals are the refusals of one gRPC client implementation.
type clientRefusals struct {
	Client string `json:"client"`
	// RulesFrom is the release its rules were read from.
	RulesFrom string          `json:"rulesFrom"`
	Refusals  []clientRefusal `json:"refusals"`
}

// clientRefusal is one rule of a client a resource of a group breaks:
// the problem as `pylon explain --client` reports it (route.ClientProblem),
// with where it is written and the group it reaches.
type clientRefusal struct {
	File  string `json:"file,omitempty"`
	Line  int    `json:"line,omitempty"`
	Group string `json:"group"`
	route.ClientProblem
}

// byClient splits a refusal into the problems of no client and those of
// the groups' gRPC clients, per client in grpcrules.All's order. A
// diagnostic that does not read as a client's rule stays with the others.
func byClient(problems diag.List) (other diag.List, clients []clientRefusals) {
	per := map[grpcrules.Client][]clientRefusal{}
	for _, d := range problems {
		who, r, ok := clientRefusalOf(d)
		if !ok {
			other = append(other, d)
			continue
		}
		for _, c := range who {
			per[c] = append(per[c], r)
		}
	}
	for _, c := range grpcrules.All {
		if len(per[c]) > 0 {
			clients = append(clients, clientRefusals{Client: string(c), RulesFrom: grpcrules.Versions[c], Refusals: per[c]})
		}
	}
	return other, clients
}

// clientRefusalOf reads a diagnostic of the compile's group client check
// (compile/grpcclients.go) by its Refusal.
func clientRefusalOf(d diag.Diagnostic) ([]grpcrules.Client, clientRefusal, bool) {
	r := d.Refusal
	if r == nil {
		return nil, clientRefusal{}, false
	}
	who := make([]grpcrules.Client, 0, len(r.Clients))
	for _, name := range r.Clients {
		c, ok := grpcrules.Parse(name)
		if !ok {
			return nil, clientRefusal{}, false
		}
		who = append(who, c)
	}
	return who, clientRefusal{File: d.File, Line: d.Line, Group: r.Group, ClientProblem: route.ClientProblem{Type: d.Type, Name: d.Name, Field: d.Field,
		Effect: r.Effect, Message: r.Detail, Rule: r.Rule, Docs: route.RulesDocs}}, true
}

// effectPhrase says what a client does with a resource, in a sentence.
var effectPhrase = map[string]string{
	string(grpcrules.NACK):     "NACKs it",
	string(grpcrules.Unusable): "accepts it and fails RPCs",
	string(grpcrules.Ignored):  "accepts it and ignores it",
	string(grpcrules.Crash):    "crashes on it",
}

// refusedError is a refusal as validate says it: the problems of no
// client as the compile lists them, then each client's.
func refusedError(err error) error {
	var problems diag.List
	if !errors.As(err, &problems) {
		return fmt.Errorf("config refused:\n%w", err)
	}
	other, clients := byClient(problems)
	if len(clients) == 0 {
		return fmt.Errorf("config refused:\n%w", err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "config refused: %s", countOf(len(problems), "problem"))
	for _, d := range other {
		fmt.Fprintf(&b, "\n  %s", d)
	}
	writeClientRefusals(&b, clients)
	return errors.New(b.String())
}

func writeClientRefusals(w io.Writer, clients []clientRefusals) {
	fmt.Fprint(w, "\ngRPC clients of the groups would reject what they receive:")
	for _, c := range clients {
		fmt.Fprintf(w, "\n%s (rules of %s): %s", c.Client, c.RulesFrom, countOf(len(c.Refusals), "refusal"))
		for _, r := range c.Refusals {
			d := diag.Diagnostic{File: r.File, Line: r.Line, Type: r.Type, Name: r.Name, Field: r.Field,
				Message: fmt.Sprintf("group %q: %s: %s", r.Group, effectPhrase[r.Effect], r.Message)}
			fmt.Fprintf(w, "\n  %s\n    rule %s, %s", d, r.Rule, r.Docs)
		}
	}
}

func countOf(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
