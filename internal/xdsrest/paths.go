package xdsrest

import (
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	// The discovery services' descriptors, whose Fetch methods carry the
	// REST paths in their google.api.http options.
	_ "github.com/envoyproxy/go-control-plane/envoy/service/cluster/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/service/endpoint/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/service/extension/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/service/listener/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/service/route/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/service/runtime/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/service/secret/v3"

	"github.com/pylon-xds/pylon/internal/xdstype"
)

// httpRuleField is the number of the google.api.http method option
// (google/api/annotations.proto).
const httpRuleField = 72295728

// paths maps each REST path to the type it serves. The paths are read from
// the same place Envoy reads them: the google.api.http "post" option of the
// type's service's Fetch method (Envoy's HttpSubscriptionImpl sets
// path_ = http_rule.post(); source/extensions/config_subscription/rest/
// http_subscription_impl.cc), e.g. /v3/discovery:clusters. A type whose
// service has no such method (VHDS, delta only) has no REST path: REST is
// state of the world only.
func paths(reg *xdstype.Registry) map[string]*xdstype.Type {
	out := map[string]*xdstype.Type{}
	for _, t := range reg.Ranked() {
		if t.SotWMethod == "" {
			continue
		}
		d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(t.Service))
		if err != nil {
			continue
		}
		sd, ok := d.(protoreflect.ServiceDescriptor)
		if !ok {
			continue
		}
		methods := sd.Methods()
		for i := range methods.Len() {
			if p := httpPost(methods.Get(i)); p != "" {
				out[p] = t
			}
		}
	}
	return out
}

// httpPost returns the method's google.api.http "post" path, "" if none.
// The option is read by field number so that no direct dependency on the
// annotations package is needed: the generated service packages link it.
func httpPost(m protoreflect.MethodDescriptor) string {
	opts := m.Options()
	if opts == nil {
		return ""
	}
	var post string
	opts.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Number() != httpRuleField || fd.Kind() != protoreflect.MessageKind {
			return true
		}
		if f := fd.Message().Fields().ByName("post"); f != nil {
			post = v.Message().Get(f).String()
		}
		return false
	})
	return post
}
