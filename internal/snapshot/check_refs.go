package snapshot

import (
	"fmt"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/pylon-xds/pylon/internal/diag"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// refProblems checks the references in made against the resources being
// built (by type URL, then name): each must exist, unless the client does
// without it (Ref.Optional), and be of a type the referrer accepts
// (Ref.Accept). Problems name in's field that holds the reference.
func refProblems(reg *xdstype.Registry, in *xdstype.Resource, refs []xdstype.Ref, byType map[string]map[string]*Resource) diag.List {
	var out diag.List
	for _, ref := range refs {
		target, ok := byType[ref.TypeURL][ref.Name]
		if !ok {
			if ref.Optional {
				continue
			}
			kind := ref.TypeURL
			if t := reg.Lookup(ref.TypeURL); t != nil {
				kind = t.Kind
			}
			out = append(out, diagOf(in, ref.Field, "names %s %q, which does not exist", kind, ref.Name))
			continue
		}
		if msg := acceptProblem(ref, target); msg != "" {
			out = append(out, diagOf(in, ref.AcceptField, "%s", msg))
		}
	}
	return out
}

// acceptProblem says why target's payload is not of a type ref accepts,
// or returns "". Envoy compares an extension config's type (inside a
// TypedStruct, the type it carries) with config_discovery.type_urls by
// message name, whatever the URL's prefix, and rejects the update on a
// mismatch ("filter config has type URL X but expect Y",
// source/common/filter/config_discovery_impl.cc); a listener arriving
// after an extension config it does not accept falls back to its default.
func acceptProblem(ref xdstype.Ref, target *Resource) string {
	if len(ref.Accept) == 0 {
		return ""
	}
	tc, ok := target.Message.(*corev3.TypedExtensionConfig)
	if !ok || tc.GetTypedConfig() == nil {
		return "" // ValidateAll refuses an extension config without one
	}
	got := factoryType(tc.GetTypedConfig())
	for _, a := range ref.Accept {
		if messageName(a) == got {
			return ""
		}
	}
	return fmt.Sprintf("accepts %s, but TypedExtensionConfig %q holds a %s; Envoy would reject it", strings.Join(ref.Accept, ", "), ref.Name, got)
}

// typedStructs are the containers whose inner type_url (field 1) names the
// extension, as Envoy's Config::Utility::getFactoryType reads it.
var typedStructs = map[string]bool{"xds.type.v3.TypedStruct": true, "udpa.type.v1.TypedStruct": true}

func factoryType(a *anypb.Any) string {
	name := messageName(a.GetTypeUrl())
	if !typedStructs[name] {
		return name
	}
	b := a.GetValue()
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			break
		}
		b = b[n:]
		if num == 1 && typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				break
			}
			return messageName(string(v))
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			break
		}
		b = b[n:]
	}
	return name
}

// messageName is a type URL's message name: what follows its last '/'.
func messageName(url string) string {
	return url[strings.LastIndexByte(url, '/')+1:]
}
