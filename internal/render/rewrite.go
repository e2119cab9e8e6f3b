package render

import (
	"fmt"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
)

// maxDepth bounds the walk through nested messages and Anys: Envoy's
// protos nest a few dozen levels at most, and a config cannot make the
// walk recurse without end.
const maxDepth = 100

// rewriter turns the config sources a resource subscribes through (ADS,
// as Pylon translates them) into files in the folder Envoy reads, and
// records each per-name file it points at: Envoy's filesystem
// subscriptions for RDS, EDS and SDS take exactly one resource, of the
// subscribed name, per file.
type rewriter struct {
	files *names
	// need are the per-name files the rewritten resources point at, by
	// type URL then resource name.
	need map[string]map[string]bool
}

// rewrite returns a copy of m with its ADS config sources pointing at
// files; m is shared with the snapshot and never changed. A config source
// it cannot turn into a file (one it does not know the subscribed name
// of) is an error naming the field.
func (w *rewriter) rewrite(m proto.Message) (proto.Message, error) {
	c := proto.Clone(m)
	if _, err := w.walk(c.ProtoReflect(), "", 0); err != nil {
		return nil, err
	}
	return c, nil
}

// walk rewrites m in place and reports whether it changed anything (an
// Any holding a changed message is packed again).
func (w *rewriter) walk(m protoreflect.Message, path string, depth int) (bool, error) {
	if depth > maxDepth {
		return false, fmt.Errorf("%s: nested deeper than %d messages", path, maxDepth)
	}
	if a, ok := m.Interface().(*anypb.Any); ok {
		return w.walkAny(a, path, depth)
	}
	changed, err := w.visit(m.Interface(), path)
	if err != nil {
		return false, err
	}
	var fields []protoreflect.FieldDescriptor
	m.Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
		if fd.Message() != nil {
			fields = append(fields, fd)
		}
		return true
	})
	for _, fd := range fields {
		name := join(path, string(fd.Name()))
		switch {
		case fd.IsMap():
			if fd.MapValue().Message() == nil {
				continue
			}
			var err error
			m.Get(fd).Map().Range(func(k protoreflect.MapKey, v protoreflect.Value) bool {
				var c bool
				c, err = w.walk(v.Message(), fmt.Sprintf("%s[%q]", name, k.String()), depth+1)
				changed = changed || c
				return err == nil
			})
			if err != nil {
				return false, err
			}
		case fd.IsList():
			l := m.Get(fd).List()
			for i := range l.Len() {
				c, err := w.walk(l.Get(i).Message(), fmt.Sprintf("%s[%d]", name, i), depth+1)
				if err != nil {
					return false, err
				}
				changed = changed || c
			}
		default:
			c, err := w.walk(m.Get(fd).Message(), name, depth+1)
			if err != nil {
				return false, err
			}
			changed = changed || c
		}
	}
	return changed, nil
}

// walkAny unpacks an Any with the global registry, rewrites what it holds
// and packs it again if that changed. An Any of a type this binary does
// not know holds nothing Pylon translated and is left as it is.
func (w *rewriter) walkAny(a *anypb.Any, path string, depth int) (bool, error) {
	inner, err := a.UnmarshalNew()
	if err != nil {
		return false, nil
	}
	changed, err := w.walk(inner.ProtoReflect(), path, depth+1)
	if err != nil || !changed {
		return false, err
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(inner)
	if err != nil {
		return false, fmt.Errorf("%s: %w", path, err)
	}
	a.Value = b
	return true, nil
}

// visit rewrites the config sources of the messages whose subscribed
// name it knows, and refuses any other config source that would reach a
// management server.
func (w *rewriter) visit(m proto.Message, path string) (bool, error) {
	switch v := m.(type) {
	case *clusterv3.Cluster:
		eds := v.GetEdsClusterConfig()
		if eds == nil || !remote(eds.GetEdsConfig()) {
			return false, nil
		}
		name := eds.GetServiceName()
		if name == "" {
			name = v.GetName()
		}
		eds.EdsConfig = w.source(edsURL, name)
		return true, nil
	case *hcmv3.Rds:
		if !remote(v.GetConfigSource()) {
			return false, nil
		}
		v.ConfigSource = w.source(rdsURL, v.GetRouteConfigName())
		return true, nil
	case *tlsv3.SdsSecretConfig:
		if !remote(v.GetSdsConfig()) {
			return false, nil
		}
		v.SdsConfig = w.source(sdsURL, v.GetName())
		return true, nil
	case *hcmv3.HttpFilter:
		return w.extension(v.GetConfigDiscovery(), v.GetName()), nil
	case *listenerv3.Filter:
		return w.extension(v.GetConfigDiscovery(), v.GetName()), nil
	case *listenerv3.ListenerFilter:
		return w.extension(v.GetConfigDiscovery(), v.GetName()), nil
	case *corev3.ConfigSource:
		if remote(v) {
			return false, fmt.Errorf("%s: a config source that reaches a management server (%s), which render cannot deliver through files", orRoot(path), kind(v))
		}
	}
	return false, nil
}

// extension rewrites a filter's extension config source (ECDS): it
// subscribes to the extension config named as the filter.
func (w *rewriter) extension(ecs *corev3.ExtensionConfigSource, name string) bool {
	if ecs == nil || !remote(ecs.GetConfigSource()) {
		return false
	}
	ecs.ConfigSource = w.source(ecdsURL, name)
	return true
}

// remote reports whether a config source subscribes through a management
// server (ADS, the server that sent the resource, or an API server): what
// a proxy fed with files cannot reach. A source that is already a file is
// left as the config wrote it.
func remote(cs *corev3.ConfigSource) bool {
	if cs == nil {
		return false
	}
	switch cs.GetConfigSourceSpecifier().(type) {
	case *corev3.ConfigSource_Path, *corev3.ConfigSource_PathConfigSource:
		return false
	}
	return true
}

func kind(cs *corev3.ConfigSource) string {
	switch cs.GetConfigSourceSpecifier().(type) {
	case *corev3.ConfigSource_Ads:
		return "ads"
	case *corev3.ConfigSource_Self:
		return "self"
	case *corev3.ConfigSource_ApiConfigSource:
		return "api_config_source"
	}
	return "no specifier"
}

// source is the config source of one per-name file, recorded as needed.
func (w *rewriter) source(typeURL, name string) *corev3.ConfigSource {
	if w.need[typeURL] == nil {
		w.need[typeURL] = map[string]bool{}
	}
	w.need[typeURL][name] = true
	return w.files.source(w.files.perName(typeURL, name))
}

func join(a, b string) string {
	if a == "" {
		return b
	}
	return a + "." + b
}

func orRoot(path string) string {
	if path == "" {
		return "(the resource)"
	}
	return path
}
