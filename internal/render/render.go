// Package render writes a node's resources as files for Envoy's
// filesystem subscriptions (path_config_source), with a bootstrap that
// points at them: delivery for proxies that cannot reach Pylon over gRPC.
//
// Envoy reads each file as a DiscoveryResponse (YAML here, by its
// extension) when a file is moved into the watched folder; RDS, EDS and
// SDS subscriptions take one resource of the subscribed name per file, so
// those (and ECDS) get a file per name, and the ADS config sources in the
// resources (a cluster's EDS, a listener's RDS, a TLS context's SDS, a
// filter's ECDS) are rewritten to point at them. Write replaces each file atomically, in
// make-before-break order.
package render

import (
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"sigs.k8s.io/yaml"

	"github.com/pylon-xds/pylon/internal/bootstrap"
	"github.com/pylon-xds/pylon/internal/redact"
	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// Options says what to render for whom.
type Options struct {
	// EnvoyDir is the folder as Envoy reads it (absolute): the paths in the
	// config sources and the bootstrap are under it. It may differ from
	// where the files are written when they are shipped to the proxy.
	EnvoyDir string
	// Node is the bootstrap's node (id, cluster, locality, metadata) and
	// admin port; its xDS address is not used.
	Node bootstrap.Options
	// IncludeSecrets allows resources holding private key material (a
	// Secret's private key, ...). Without it they are refused: files on
	// disk are a key's easiest way out.
	IncludeSecrets bool
}

// File is one file to write: its base name and content.
type File struct {
	Name string
	Data []byte
}

// unsupported are the types a proxy cannot receive through files: VHDS is
// incremental only, and scoped routes name route configurations through
// one config source, while a file can hold only one of them.
var unsupported = map[string]string{
	xdstype.VirtualHostURL: "VHDS is incremental xDS only",
	xdstype.ScopedRouteURL: "scoped routes subscribe to every route configuration through one config source",
}

// Render returns the files of snap, in the order to write them: Secrets,
// endpoints, runtimes and extension configs, then clusters, then route configurations, then
// listeners (make-before-break: what a resource names is in place before
// it), and the bootstrap last.
func Render(snap *snapshot.Snapshot, o Options) ([]File, error) {
	if !path.IsAbs(o.EnvoyDir) {
		return nil, fmt.Errorf("the folder Envoy reads (%q) must be an absolute path", o.EnvoyDir)
	}
	o.EnvoyDir = path.Clean(o.EnvoyDir)
	if err := check(snap, o.IncludeSecrets); err != nil {
		return nil, err
	}
	w := &rewriter{files: &names{dir: o.EnvoyDir, byFile: map[string]string{}}, need: map[string]map[string]bool{}}
	lds, err := w.whole(snap.Set(ldsURL))
	if err != nil {
		return nil, err
	}
	cds, err := w.whole(snap.Set(cdsURL))
	if err != nil {
		return nil, err
	}
	rds, err := w.each(snap.Set(rdsURL))
	if err != nil {
		return nil, err
	}
	// Route configurations name nothing by config source; Secrets may
	// (a validation context's SDS), so they are rewritten too.
	sds, err := w.each(snap.Set(sdsURL))
	if err != nil {
		return nil, err
	}
	eds, err := w.each(snap.Set(edsURL))
	if err != nil {
		return nil, err
	}
	rtds, err := w.each(snap.Set(rtdsURL))
	if err != nil {
		return nil, err
	}
	ecds, err := w.each(snap.Set(ecdsURL))
	if err != nil {
		return nil, err
	}
	boot, err := bootstrapFile(o, w.files, snap.Set(rtdsURL).Names())
	if err != nil {
		return nil, err
	}
	if w.files.err != nil {
		return nil, w.files.err
	}
	// A per-name file a resource points at must exist when Envoy loads the
	// config source: a name the snapshot lacks gets an empty response (as
	// a management server would answer it: nothing of that name).
	missing := w.missing(slices.Concat(sds, eds, rds, ecds))
	return slices.Concat(sds, eds, rtds, ecds, missing, []File{cds}, rds, []File{lds, boot}), nil
}

// check refuses the types files cannot deliver and, unless allowed, any
// resource holding key material: whatever redact would hide from a dump
// (redact.Inline, the rule snapshot's output gate refuses key material
// outside a Secret by) is what must not reach a disk unasked. Only a
// Secret can hold it here: the gate refused any other such resource.
func check(snap *snapshot.Snapshot, includeSecrets bool) error {
	for _, set := range snap.Sets() {
		if set.Len() == 0 {
			continue
		}
		if why, bad := unsupported[set.Type().URL]; bad {
			return fmt.Errorf("%s %q: cannot be delivered through files: %s", set.Type().Kind, set.Names()[0], why)
		}
		if includeSecrets {
			continue
		}
		for _, name := range set.Names() {
			if f := redact.Inline(set.Get(name).Message); len(f) > 0 {
				return fmt.Errorf("%s %q holds %s at %s: render writes it to disk only with --include-secrets", set.Type().Kind, name, f[0].What, f[0].Field)
			}
		}
	}
	return nil
}

// whole is the file of a type whose set is one response (listeners,
// clusters), empty when the set is: the file must exist for Envoy to start.
func (w *rewriter) whole(set *snapshot.Set) (File, error) {
	t := set.Type()
	name := LDSFile
	if t.URL == cdsURL {
		name = CDSFile
	}
	resp := &discoveryv3.DiscoveryResponse{TypeUrl: t.URL, VersionInfo: set.Version()}
	for _, n := range set.Names() {
		a, err := w.resource(set, n)
		if err != nil {
			return File{}, err
		}
		resp.Resources = append(resp.Resources, a)
	}
	return response(name, resp)
}

// each is a file per resource.
func (w *rewriter) each(set *snapshot.Set) ([]File, error) {
	var out []File
	for _, n := range set.Names() {
		a, err := w.resource(set, n)
		if err != nil {
			return nil, err
		}
		resp := &discoveryv3.DiscoveryResponse{TypeUrl: set.Type().URL, VersionInfo: set.Get(n).Version, Resources: []*anypb.Any{a}}
		f, err := response(w.files.perName(set.Type().URL, n), resp)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

// resource is one resource rewritten and packed, its errors naming it.
func (w *rewriter) resource(set *snapshot.Set, name string) (*anypb.Any, error) {
	m, err := w.rewrite(set.Get(name).Message)
	if err != nil {
		return nil, fmt.Errorf("%s %q: %w", set.Type().Kind, name, err)
	}
	// The output gate again, on what is written: Envoy rejects a file
	// whose resource fails its proto validation.
	if v, ok := m.(interface{ ValidateAll() error }); ok {
		if err := v.ValidateAll(); err != nil {
			return nil, fmt.Errorf("%s %q as rendered: %w", set.Type().Kind, name, err)
		}
	}
	a, err := anypb.New(m)
	if err != nil {
		return nil, fmt.Errorf("%s %q: %w", set.Type().Kind, name, err)
	}
	return a, nil
}

// missing are empty responses for the per-name files pointed at but not
// among files.
func (w *rewriter) missing(files []File) []File {
	have := map[string]bool{}
	for _, f := range files {
		have[f.Name] = true
	}
	var out []File
	for _, typeURL := range []string{sdsURL, edsURL, ecdsURL, rdsURL} {
		names := make([]string, 0, len(w.need[typeURL]))
		for n := range w.need[typeURL] {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			file := w.files.perName(typeURL, n)
			if have[file] {
				continue
			}
			f, err := response(file, &discoveryv3.DiscoveryResponse{TypeUrl: typeURL})
			if err == nil {
				out = append(out, f)
			}
		}
	}
	return out
}

// response is a DiscoveryResponse as YAML. protojson's output is
// deliberately unstable in its spacing; going through YAML makes it
// stable, so an unchanged resource gives an unchanged file.
func response(name string, resp *discoveryv3.DiscoveryResponse) (File, error) {
	b, err := yamlOf(resp)
	if err != nil {
		return File{}, fmt.Errorf("%s: %w", name, err)
	}
	return File{Name: name, Data: b}, nil
}

func yamlOf(m proto.Message) ([]byte, error) {
	js, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(m)
	if err != nil {
		return nil, err
	}
	return yaml.JSONToYAML(js)
}

// bootstrapFile is Envoy's bootstrap: the node, the admin listener on
// 127.0.0.1, listeners and clusters from lds.yaml and cds.yaml, and a
// runtime layer per Runtime resource.
func bootstrapFile(o Options, files *names, runtimes []string) (File, error) {
	// bootstrap.Envoy checks the node as serve would and builds it; the
	// ADS parts it adds for gRPC delivery are replaced.
	n := o.Node
	n.XDSAddress = "127.0.0.1:1"
	n.TLS = nil
	b, err := bootstrap.Envoy(n)
	if err != nil {
		return File{}, fmt.Errorf("bootstrap: %w", err)
	}
	b.StaticResources = nil
	b.DynamicResources = &bootstrapv3.Bootstrap_DynamicResources{
		LdsConfig: files.source(LDSFile),
		CdsConfig: files.source(CDSFile),
	}
	if len(runtimes) > 0 {
		rt := &bootstrapv3.LayeredRuntime{}
		for _, r := range runtimes {
			rt.Layers = append(rt.Layers, &bootstrapv3.RuntimeLayer{
				Name: "rtds-" + r,
				LayerSpecifier: &bootstrapv3.RuntimeLayer_RtdsLayer_{RtdsLayer: &bootstrapv3.RuntimeLayer_RtdsLayer{
					Name: r, RtdsConfig: files.source(files.perName(rtdsURL, r)),
				}},
			})
		}
		// The admin layer keeps runtime changes through the admin
		// endpoint possible, as without a layered runtime.
		rt.Layers = append(rt.Layers, &bootstrapv3.RuntimeLayer{Name: "admin", LayerSpecifier: &bootstrapv3.RuntimeLayer_AdminLayer_{AdminLayer: &bootstrapv3.RuntimeLayer_AdminLayer{}}})
		b.LayeredRuntime = rt
	}
	if err := b.ValidateAll(); err != nil {
		return File{}, fmt.Errorf("bootstrap: %w", err)
	}
	data, err := yamlOf(b)
	if err != nil {
		return File{}, fmt.Errorf("bootstrap: %w", err)
	}
	return File{Name: BootstrapFile, Data: data}, nil
}

// Owned reports whether a file name is one render writes (and so may
// remove when its resource is gone).
func Owned(name string) bool { return ownName().MatchString(name) && !strings.HasPrefix(name, ".") }
