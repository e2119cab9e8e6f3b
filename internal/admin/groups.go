package admin

import (
	"net/http"

	"github.com/pylon-xds/pylon/internal/nodegroup"
)

// registerGroups adds GET /v1/groups (read token): the rules of the node
// groups being served. A relay in front learns from it which group each
// of its proxies would be in (docs/relay.md). It shows no more than the
// read token already reads in /config and /v1/objects.
func registerGroups(mux *http.ServeMux, g guard) {
	mux.HandleFunc("GET /v1/groups", g.read(func(w http.ResponseWriter, r *http.Request) {
		body := nodegroup.Rules{Groups: []nodegroup.Rule{}}
		if f := g.o.Fleets.Current(); f != nil {
			body.Version = f.Version()
			for _, rule := range f.Rules() {
				body.Groups = append(body.Groups, rule.Rule())
			}
		}
		writeJSON(w, http.StatusOK, body)
	}))
}
