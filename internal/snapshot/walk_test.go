package snapshot

import (
	"strings"
	"testing"

	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/structpb"
)

// TestWalkerSkipsOnlyWhatCannotHold: the walk skips a type that cannot
// hold a checked message (a Struct, recursive through Value), and still
// reaches one only a recursive type leads to: a bad regex two levels down
// RBAC's and_rules is found, with its whole path.
func TestWalkerSkipsOnlyWhatCannotHold(t *testing.T) {
	w := newWalker(map[protoreflect.FullName]bool{})
	if w.mayHold((&structpb.Struct{}).ProtoReflect().Descriptor()) {
		t.Error("a Struct is said to hold a checked message")
	}
	if !w.mayHold((&rbacv3.Permission{}).ProtoReflect().Descriptor()) {
		t.Error("an RBAC Permission is said not to hold a regex")
	}
	bad := &rbacv3.Permission{Rule: &rbacv3.Permission_AndRules{AndRules: &rbacv3.Permission_Set{Rules: []*rbacv3.Permission{
		{Rule: &rbacv3.Permission_Any{Any: true}},
		{Rule: &rbacv3.Permission_AndRules{AndRules: &rbacv3.Permission_Set{Rules: []*rbacv3.Permission{
			{Rule: &rbacv3.Permission_UrlPath{UrlPath: &matcherv3.PathMatcher{Rule: &matcherv3.PathMatcher_Path{Path: &matcherv3.StringMatcher{
				MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: "(("}},
			}}}}},
		}}}},
	}}}}
	var fields []string
	for _, fe := range validate(bad, map[protoreflect.FullName]bool{}) {
		fields = append(fields, fe.field)
	}
	want := "and_rules.rules[1].and_rules.rules[0].url_path.path.safe_regex.regex"
	if !strings.Contains(strings.Join(fields, " "), want) {
		t.Errorf("problems at %v, want one at %s", fields, want)
	}
}
