package snapshot

import (
	"fmt"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/pylon-xds/pylon/internal/diag"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// ScopeKeyClashes refuses two ScopedRouteConfigurations with one key in
// one snapshot: Envoy receives every scope (SRDS is a wildcard type) and
// rejects the whole SRDS update on a "scope key conflict"
// (ScopedRdsConfigSubscription::detectUpdateConflictAndCleanupRemoved in
// source/common/router/scoped_rds.cc). It is a check per group snapshot:
// two groups may use one key for different scopes. group names the group
// in the message ("" for an ungrouped fleet); where locates a scope's
// input, nil if unknown; reported holds the pairs already reported, so a
// clash present in several groups is said once.
func ScopeKeyClashes(s *Snapshot, group string, where func(name string) *xdstype.Resource, reported map[[2]string]bool) diag.List {
	var problems diag.List
	owner := map[string]string{}
	set := s.Set(xdstype.ScopedRouteURL)
	for _, name := range set.Names() {
		sc, ok := set.Get(name).Message.(*routev3.ScopedRouteConfiguration)
		if !ok {
			continue
		}
		key := scopeKey(sc)
		prev, clash := owner[key]
		if !clash {
			owner[key] = name
			continue
		}
		if reported[[2]string{prev, name}] {
			continue
		}
		reported[[2]string{prev, name}] = true
		msg := fmt.Sprintf("the same key as ScopedRouteConfiguration %q", prev)
		if in := where(prev); in != nil {
			msg += " (" + location(in) + ")"
		}
		if group != "" {
			msg += fmt.Sprintf(" in group %q", group)
		}
		d := diag.Diagnostic{Type: "ScopedRouteConfiguration", Name: name, Field: "key", Message: msg + "; Envoy would reject the SRDS update"}
		if in := where(name); in != nil {
			d.File, d.Line = in.File, in.Line
		}
		problems = append(problems, d)
	}
	return problems
}

// scopeKey encodes a scope's key fragments so that two keys are equal
// exactly when their encodings are (lengths keep "a","bc" from "ab","c").
func scopeKey(sc *routev3.ScopedRouteConfiguration) string {
	var b strings.Builder
	for _, f := range sc.GetKey().GetFragments() {
		fmt.Fprintf(&b, "%d:%s;", len(f.GetStringKey()), f.GetStringKey())
	}
	return b.String()
}
