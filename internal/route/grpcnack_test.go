package route

import (
	"strings"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/fault/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
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

// GRPCListenerRejects names what grpc-go refuses in an api_listener's
// connection manager, and passes a plain one.
func TestGRPCListenerRejectsNamesTheField(t *testing.T) {
	parse := func(js string) *hcmv3.HttpConnectionManager {
		h := &hcmv3.HttpConnectionManager{}
		if err := protojson.Unmarshal([]byte(js), h); err != nil {
			t.Fatal(err)
		}
		return h
	}
	router := `{"name": "router", "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}`
	fault := `{"name": "fault", "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.fault.v3.HTTPFault"}}`
	if got := GRPCListenerRejects("ok", parse(`{"rds": {"route_config_name": "r", "config_source": {"ads": {}}}, "http_filters": [`+fault+`, `+router+`]}`)); len(got) != 0 {
		t.Errorf("a plain listener flagged: %q", got)
	}
	got := strings.Join(GRPCListenerRejects("bad", parse(`{"xff_num_trusted_hops": 2, "rds": {"route_config_name": "r", "config_source": {"path_config_source": {"path": "/x"}}}, "http_filters": [`+router+`, `+fault+`]}`)), "\n")
	for _, want := range []string{
		`listener "bad": xff_num_trusted_hops is 2`,
		`rds.config_source must be ads or self`,
		`http_filters[0]: the router is a terminal filter and must be last`,
		`http_filters ends with "fault", not the router`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
	if got := GRPCListenerRejects("none", parse(`{"rds": {"route_config_name": "r", "config_source": {"ads": {}}}}`)); len(got) != 1 || !strings.Contains(got[0], "http_filters is empty") {
		t.Errorf("no filters: %q", got)
	}
}
