package configstore

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/pylon-xds/pylon/internal/store"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// resourceName is the name a raw resource gives itself: its type's name
// field, or clusterName for a ClusterLoadAssignment.
func resourceName(t *xdstype.Type, m map[string]any) string {
	name, _ := m[t.NameField()].(string)
	if name == "" {
		name, _ = m["clusterName"].(string)
	}
	return name
}

// modelName is the name a model object gives itself: a grpc target is
// named by its target, everything else by its name.
func modelName(kind string, m map[string]any) string {
	field := "name"
	if kind == "grpc" {
		field = "target"
	}
	name, _ := m[field].(string)
	return name
}

// CheckKey checks that a body written to k (one object, as JSON) is an
// object of k's kind that names itself k.Name: a PUT to services/new whose
// body says "other" would otherwise store an object under one name that
// compiles under another. Registered endpoints are refused here: they
// have their own route, which checks them and leases them.
func CheckKey(reg *xdstype.Registry, k store.Key, body []byte) error {
	bad := func(field, format string, args ...any) error {
		return &ValidationError{Err: fmt.Errorf("%s/%s: %s: %s", k.Kind, k.Name, field, fmt.Sprintf(format, args...))}
	}
	switch {
	case k == GroupsKey:
		var list []any
		if err := json.Unmarshal(body, &list); err != nil {
			return bad("body", "the groups are one list of groups")
		}
		return nil
	case k.Kind == GroupsKey.Kind:
		return bad("name", "the groups are one object named %q", GroupsKey.Name)
	case strings.HasPrefix(k.Kind, "endpoints."):
		return bad("kind", "endpoints are registered with POST /v1/services/%s/endpoints", strings.TrimPrefix(k.Kind, "endpoints."))
	}
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil || m == nil {
		return bad("body", "one object, as a JSON or YAML mapping")
	}
	if kind, ok := strings.CutPrefix(k.Kind, "resources."); ok {
		url, _ := m["@type"].(string)
		t := reg.Lookup(url)
		if t == nil || t.Kind != kind {
			return bad("@type", "%q is not the type URL of a %s", short(url), kind)
		}
		if name := resourceName(t, m); name != k.Name {
			return bad(t.NameField(), "%q is not the name in the path, %q", short(name), k.Name)
		}
		return nil
	}
	if !contains(modelKinds, k.Kind) {
		return bad("kind", "unknown kind: one of %s, groups or resources.<Kind>", strings.Join(modelKinds, ", "))
	}
	if name := modelName(k.Kind, m); name != k.Name {
		field := "name"
		if k.Kind == "grpc" {
			field = "target"
		}
		return bad(field, "%q is not the name in the path, %q", short(name), k.Name)
	}
	return nil
}

// short bounds what an error quotes of a body: a name may be megabytes.
func short(s string) string {
	if len(s) > 128 {
		return s[:128] + "..."
	}
	return s
}
