package admin

import (
	"net/http"

	"github.com/pylon-xds/pylon/internal/nodegroup"
)

// GroupRule is one node group's rule as GET /v1/groups shows it: what a
// relay needs to key its proxies by the group this server would put them
// in. Neither the group's resources nor its rollout: only how nodes are
// matched.
type GroupRule struct {
	Name       string          `json:"name"`
	Match      nodegroup.Match `json:"match"`
	Default    bool            `json:"default,omitempty"`
	Identities []string        `json:"identities,omitempty"`
}

// GroupsBody is GET /v1/groups: the served fleet's version and its group
// rules, in the order they are tried.
type GroupsBody struct {
	Version string      `json:"version"`
	Groups  []GroupRule `json:"groups"`
}

// registerGroups adds GET /v1/groups (read token): the rules of the node
// groups being served. A relay in front learns from it which group each
// of its proxies would be in (docs/relay.md). It shows no more than the
// read token already reads in /config and /v1/objects.
func registerGroups(mux *http.ServeMux, g guard) {
	mux.HandleFunc("GET /v1/groups", g.read(func(w http.ResponseWriter, r *http.Request) {
		body := GroupsBody{Groups: []GroupRule{}}
		if f := g.o.Fleets.Current(); f != nil {
			body.Version = f.Version()
			for _, rule := range f.Rules() {
				body.Groups = append(body.Groups, GroupRule{Name: rule.Name, Match: rule.Match, Default: rule.Default, Identities: rule.Identities})
			}
		}
		writeJSON(w, http.StatusOK, body)
	}))
}
