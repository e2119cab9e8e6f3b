package route

import (
	"strings"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/encoding/protojson"
)

// GRPCRejects names each route grpc-go's xDS client refuses, with the
// field, and passes what it takes (or skips).
func TestGRPCRejectsNamesTheRouteAndField(t *testing.T) {
	rc := &routev3.RouteConfiguration{}
	if err := protojson.Unmarshal([]byte(`{"name": "rc", "virtual_hosts": [{"name": "vh", "domains": ["*"],
	  "retry_policy": {"num_retries": 0},
	  "routes": [
	    {"name": "fine", "match": {"prefix": "/a", "headers": [{"name": "x", "safe_regex_match": {"regex": "a+"}}]}, "route": {"cluster": "c", "retry_policy": {"num_retries": 2}}},
	    {"name": "skipped", "match": {"prefix": "/", "query_parameters": [{"name": "q", "present_match": true}]}, "route": {"weighted_clusters": {"clusters": [{"name": "c", "weight": 0}]}}},
	    {"name": "bad-regex", "match": {"safe_regex": {"regex": "(?<=a)b"}}, "route": {"cluster": "c"}},
	    {"name": "zero-split", "match": {"prefix": "/z"}, "route": {"weighted_clusters": {"clusters": [{"name": "c", "weight": 0}]}}},
	    {"name": "separated", "match": {"path_separated_prefix": "/p"}, "route": {"cluster": "c"}},
	    {"name": "plugin", "match": {"prefix": "/q"}, "route": {"cluster_specifier_plugin": "nope"}},
	    {"name": "redirect", "match": {"prefix": "/r"}, "redirect": {"path_redirect": "/x"}}
	  ]}]}`), rc); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(GRPCRejects(rc), "\n")
	for _, want := range []string{
		`virtual host "vh": retry_policy.num_retries is 0`,
		`route "bad-regex": match.safe_regex "(?<=a)b" does not compile as RE2`,
		`route "zero-split": weighted_clusters: every weight is 0`,
		`route "separated": match uses a path specifier gRPC clients do not know`,
		`route "plugin": cluster_specifier_plugin "nope" is not among`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
	for _, not := range []string{`"fine"`, `"skipped"`, `"redirect"`} {
		if strings.Contains(got, not) {
			t.Errorf("route %s flagged:\n%s", not, got)
		}
	}
}
