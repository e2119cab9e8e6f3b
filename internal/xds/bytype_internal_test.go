package xds

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Watches are kept in make-before-break order whatever order the client
// asked for its types in: a push walks them as they are kept.
func TestByTypeKeepsRankOrder(t *testing.T) {
	var b byType[string]
	for _, p := range []struct {
		url  string
		rank int
	}{{"route", 3}, {"listener", 0}, {"secret", 4}, {"cluster", 1}, {"endpoint", 2}} {
		b.put(p.url, p.rank, p.url+"-watch")
	}
	if diff := cmp.Diff([]string{"listener", "cluster", "endpoint", "route", "secret"}, b.urls); diff != "" {
		t.Errorf("urls not in rank order (-want +got):\n%s", diff)
	}
	for i, u := range b.urls {
		if b.ws[i] != u+"-watch" || b.at(u) != u+"-watch" {
			t.Errorf("watch of %s at %d: %q, at(%s) = %q", u, i, b.ws[i], u, b.at(u))
		}
	}
}
