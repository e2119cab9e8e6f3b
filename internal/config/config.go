// Package config reads Pylon's configuration documents (schema version 1).
//
// A document is YAML or JSON. Its top-level key "resources" holds raw Envoy v3
// resources in proto-JSON form, each with its "@type" and optionally a
// "@ttl". Decoding is strict:
// unknown top-level keys, unknown proto fields and unknown types are errors,
// and every error names the file and line, the resource type and name, and
// the field. Semantic checks (proto constraints, references, duplicates) are
// the snapshot builder's job; this package only turns bytes into messages.
package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/pylon-xds/pylon/internal/diag"
	"github.com/pylon-xds/pylon/internal/model"
	"github.com/pylon-xds/pylon/internal/nodegroup"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// MaxFileBytes bounds one configuration file; sources read at most one
// byte more, so a larger file is refused before it is parsed. 16 MiB holds
// some fifty thousand clusters with their endpoints, more than any real
// config; decoding costs about 10 bytes of heap per input byte for JSON and
// about 28 for YAML (whose parser builds a tree of the whole document), so
// the limit also bounds what one file can make Pylon allocate.
const MaxFileBytes = 16 << 20

// MinTTL is the shortest "@ttl" a resource may carry.
const MinTTL = time.Second

// MaxTotalBytes bounds all the files of one configuration together (a
// folder, or the store's objects).
const MaxTotalBytes = 64 << 20

// MaxNameBytes bounds the name of every resource and model object. Names
// travel in every xDS request and response, in Envoy's stats and logs and
// in Pylon's diagnostics; Kubernetes-derived names (namespace, name, port)
// stay well under 300 bytes, so 512 refuses only what is not a name.
const MaxNameBytes = 512

// nameProblem says what is wrong with a resource or object name, or "".
func nameProblem(name string) string {
	if len(name) > MaxNameBytes {
		return fmt.Sprintf("name is %d bytes, over the %d byte limit", len(name), MaxNameBytes)
	}
	for _, r := range name {
		if unicode.IsControl(r) {
			return fmt.Sprintf("name holds the control character %U; Envoy's stats, logs and the xDS protocol need printable names", r)
		}
		if r == utf8.RuneError {
			return "name is not valid UTF-8"
		}
	}
	return ""
}

// shortName is name cut for a diagnostic, so that a megabyte name is not
// echoed back in full.
func shortName(name string) string {
	if len(name) <= 64 {
		return strings.Clone(name) // not a piece of a file's text, kept alive by a diagnostic
	}
	cut := 64
	for cut > 0 && !utf8.RuneStart(name[cut]) {
		cut--
	}
	return name[:cut] + "..."
}

// File is one configuration file's name and contents.
type File struct {
	Path string
	Data []byte
	// Dir is the folder that relative file paths written in this file
	// (secrets' cert_file, key_file, ca_file) resolve against: the file's
	// own folder in file mode. Empty (objects from the store, which have no
	// folder): relative paths reach the reader as written, and a confined
	// reader (secretfile) resolves them against its first secret directory.
	Dir string
	// Endpoints, when not nil, is what Data decodes to, from whoever
	// rendered Data out of values it holds decoded already: the store's
	// runner renders each service's registered endpoints, thousands for
	// a busy service, on every publish. Data must then be one object
	// {"endpoints": [...]} whose item i starts on line i+1, and
	// Endpoints[i] item i's service and endpoint, with File and Line
	// Path and i+1 or left to loading to set. Loading takes them as
	// they are rather than parsing Data again, and does not modify
	// them; Data stays the file's text, what is hashed and saved (not
	// Endpoints: a file read back decodes its Data).
	Endpoints []Endpoint `json:"-"`
	// SourceBounded: the source that rendered the file bounds what it
	// holds by its own limits (the Kubernetes source: its services and
	// endpoints served), so Load leaves it out of MaxTotalBytes, which
	// bounds what the config's own writers send; a large cluster then
	// never leaves the own files no room. MaxFileBytes still holds.
	SourceBounded bool `json:"-"`
}

// Document is a whole configuration: every file's resources and groups, in
// file order.
type Document struct {
	Resources []xdstype.Resource
	Groups    []Group
	model.Model
	// Tests are the route tests every change must pass (see
	// docs/route-tests.md).
	Tests []RouteTest
	// Endpoints join services defined in any file (JoinEndpoints): how
	// the store renders the endpoints registered through the API, each an
	// item of its own, so that one more registration decodes one more
	// endpoint rather than its service's whole list again.
	Endpoints []Endpoint
	// Joined is, by service, where each endpoint JoinEndpoints appended
	// to it was written (they end its list, in this order): a problem of
	// one is reported there.
	Joined map[string][]model.Source
	// Identities are the services', route tables' and listeners' (one
	// an object, in order), by which a compile knows an object it
	// checked before (see Identity).
	Identities Identities
}

// Identities are a Document's model objects' Identities, each list as
// long as its objects'.
type Identities struct {
	Services, Routes, Listeners []Identity
}

// Endpoint is an endpoint of the top-level endpoints list: one of a
// service's endpoints, written apart from the service.
type Endpoint struct {
	Service string `json:"service"`
	model.Endpoint
	File string `json:"-"`
	Line int    `json:"-"`
}

// JoinEndpoints appends each endpoint of the top-level list to its
// service's, in file order after the service's own; an endpoint naming no
// service is a problem. The services' lists are copied, never extended in
// place: a loaded document's values may be shared with a Cache.
func (d *Document) JoinEndpoints() diag.List {
	if len(d.Endpoints) == 0 {
		return nil
	}
	byName := make(map[string]*model.Service, len(d.Services))
	for i := range d.Services {
		byName[d.Services[i].Name] = &d.Services[i]
	}
	var problems diag.List
	count := map[string]int{}
	for _, e := range d.Endpoints {
		if byName[e.Service] == nil {
			problems = append(problems, diag.Diagnostic{File: e.File, Line: e.Line, Type: "endpoint", Name: shortName(e.Service), Field: "service",
				Message: fmt.Sprintf("no service %q is defined", shortName(e.Service))})
			continue
		}
		count[e.Service]++
	}
	// Each service's list copied once, at its final size: a hot service
	// has tens of thousands of registered endpoints.
	d.Joined = make(map[string][]model.Source, len(count))
	for name, n := range count {
		s := byName[name]
		s.Endpoints = append(make([]model.Endpoint, 0, len(s.Endpoints)+n), s.Endpoints...)
		d.Joined[name] = make([]model.Source, 0, n)
	}
	for _, e := range d.Endpoints {
		if s := byName[e.Service]; s != nil {
			s.Endpoints = append(s.Endpoints, e.Endpoint)
			d.Joined[e.Service] = append(d.Joined[e.Service], model.Source{File: e.File, Line: e.Line})
		}
	}
	return problems
}

// Group is a node group as written (see docs/config.md).
type Group struct {
	Name    string `json:"name"`
	Default bool   `json:"default,omitempty"`
	Match   struct {
		ID       string            `json:"id,omitempty"`
		Cluster  string            `json:"cluster,omitempty"`
		Metadata map[string]string `json:"metadata,omitempty"`
		Region   string            `json:"region,omitempty"`
		Zone     string            `json:"zone,omitempty"`
		SubZone  string            `json:"sub_zone,omitempty"`
	} `json:"match"`
	// Scope maps a resource kind's plural ("listeners", "clusters", ...)
	// to name patterns.
	Scope map[string][]string `json:"scope,omitempty"`
	// DeltaNotFound, when false, stops delta streams listing subscribed
	// names that do not exist in removed_resources (default true).
	DeltaNotFound *bool `json:"delta_not_found,omitempty"`
	// Identities, when set, are glob patterns of the verified client
	// identities (SPIFFE IDs, DNS SANs) that may join the group.
	Identities []string `json:"identities,omitempty"`
	// Rollout stages each change of the group across its nodes
	// (docs/rollouts.md); checked by checkRollout.
	Rollout *nodegroup.Rollout `json:"rollout,omitempty"`
	// Clients, when set, are the proxyless gRPC implementations the
	// group's nodes run (grpc-go, grpc-core, grpc-js): every resource the
	// group receives is checked against what each of them accepts.
	Clients []string `json:"clients,omitempty"`

	File string `json:"-"`
	Line int    `json:"-"`
}

// Load decodes every file. It returns the document, or a diag.List naming
// every problem found; a caller must refuse the whole set on error.
func Load(reg *xdstype.Registry, files []File) (*Document, error) {
	return (*Cache)(nil).Load(reg, files)
}

// Load is Load reusing what the last loads decoded (see Cache); c may be
// nil.
func (c *Cache) Load(reg *xdstype.Registry, files []File) (*Document, error) {
	defer c.done()
	doc := &Document{}
	total, counted, first := 0, 0, ""
	for _, f := range files {
		if f.SourceBounded {
			continue
		}
		if counted == 0 {
			first = f.Path
		}
		total, counted = total+len(f.Data), counted+1
	}
	if total > MaxTotalBytes {
		return nil, diag.List{{File: first, Message: fmt.Sprintf("the %d config files hold %d bytes together, over the %d MiB limit", counted, total, MaxTotalBytes>>20)}}
	}
	var problems diag.List
	for _, f := range files {
		errs := loadFile(reg, f, doc, c)
		problems = append(problems, errs...)
	}
	if len(doc.Tests) > MaxRouteTests {
		t := doc.Tests[MaxRouteTests]
		problems = append(problems, diag.Diagnostic{File: t.File, Line: t.Line, Type: "route test", Name: shortName(t.Name),
			Message: fmt.Sprintf("%d route tests, over the limit of %d", len(doc.Tests), MaxRouteTests)})
	}
	if err := problems.Err(); err != nil {
		return nil, err
	}
	return doc, nil
}

// yamlLine is the line number the YAML parser puts before its errors.
var yamlLine = lazyRegexp(`^line (\d+):\s*`)

func loadFile(reg *xdstype.Registry, f File, doc *Document, c *Cache) diag.List {
	at := func(line int, format string, args ...any) diag.List {
		return diag.List{{File: f.Path, Line: line, Message: fmt.Sprintf(format, args...)}}
	}
	if len(f.Data) > MaxFileBytes {
		return at(0, "file is larger than the %d MiB limit (%d bytes); split it into a folder of files", MaxFileBytes>>20, MaxFileBytes)
	}
	if f.Endpoints != nil && loadDecodedEndpoints(f, doc) {
		return nil
	}
	// Aliases may expand a file, but not without bound.
	w := newJSONWriter(4*len(f.Data) + 1<<20)
	if problems, ok := loadJSON(reg, w, f, doc, c); ok {
		return problems
	}
	dec := yaml.NewDecoder(bytes.NewReader(f.Data))
	var problems diag.List
	docs := 0
	for {
		var node yaml.Node
		err := dec.Decode(&node)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			// A YAML syntax error usually means a truncated or half-written
			// file.
			msg := strings.TrimPrefix(err.Error(), "yaml: ")
			line := 0
			if m := yamlLine().FindStringSubmatch(msg); m != nil {
				line, _ = strconv.Atoi(m[1])
				msg = strings.TrimPrefix(msg, m[0])
			}
			return at(line, "invalid YAML: %s", msg)
		}
		if len(node.Content) == 0 {
			continue
		}
		docs++
		if n := taggedRaw(&node); n != nil {
			return at(n.Line, "the tag %s is Pylon's own mark of JSON it has checked; a config file cannot use it", rawJSONTag)
		}
		problems = append(problems, loadDocument(reg, w, f.Path, node.Content[0], doc, nil)...)
	}
	if docs == 0 {
		// An empty file is what an editor or a deploy tool leaves mid-write;
		// treating it as "no resources" would wipe the fleet.
		return at(0, "file is empty; write `resources: []` to serve nothing on purpose")
	}
	return problems
}

// taggedRaw returns a node of a parsed YAML document that carries
// rawJSONTag, nil if none does: the loader copies such a node's text as
// JSON it checked, so text from a file must never carry it.
func taggedRaw(n *yaml.Node) *yaml.Node {
	if n.Tag == rawJSONTag {
		return n
	}
	for _, c := range n.Content {
		if t := taggedRaw(c); t != nil {
			return t
		}
	}
	return nil
}

func loadDocument(reg *xdstype.Registry, w *jsonWriter, path string, root *yaml.Node, doc *Document, c *Cache) diag.List {
	if root.Kind != yaml.MappingNode {
		return diag.List{{File: path, Line: root.Line, Message: "a config document must be a mapping with a `resources` list"}}
	}
	var problems diag.List
	for i := 0; i+1 < len(root.Content); i += 2 {
		problems = append(problems, loadKey(reg, w, path, root.Content[i], root.Content[i+1], doc, c)...)
	}
	return problems
}

// loadKey decodes one top-level entry of a document. A list of model
// objects may hold raw JSON elements (see rawItems), decoded through c.
func loadKey(reg *xdstype.Registry, w *jsonWriter, path string, key, val *yaml.Node, doc *Document, c *Cache) diag.List {
	var problems diag.List
	switch key.Value {
	case "version":
		if msg := VersionProblem(val); msg != "" {
			problems = append(problems, diag.Diagnostic{File: path, Line: val.Line, Field: "version", Message: msg})
		}
	case "resources":
		if val.Kind == yaml.ScalarNode && val.Tag == "!!null" {
			return nil
		}
		if val.Kind != yaml.SequenceNode {
			return diag.List{{File: path, Line: val.Line, Field: "resources", Message: "must be a list"}}
		}
		for i, item := range val.Content {
			r, d := decodeResource(reg, w, path, item)
			// Let the collector have the item's nodes as soon as its
			// message exists: the tree and the messages need not both
			// be whole at once.
			val.Content[i] = nil
			if d != nil {
				problems = append(problems, *d)
				continue
			}
			doc.Resources = append(doc.Resources, r)
		}
	case "groups":
		items, _, errs := decodeItems(w, c, path, "group", val, func(g *Group, src model.Source) string { g.File, g.Line = src.File, src.Line; return g.Name })
		for _, g := range items {
			errs = append(errs, checkRollout(g)...)
		}
		doc.Groups, problems = join(doc.Groups, items), append(problems, errs...)
	case "services":
		items, ids, errs := decodeItems(w, c, path, "service", val, func(v *model.Service, src model.Source) string { v.Source = src; return v.Name })
		doc.Services, problems = join(doc.Services, items), append(problems, errs...)
		doc.Identities.Services = join(doc.Identities.Services, ids)
	case "routes":
		items, ids, errs := decodeItems(w, c, path, "route table", val, func(v *model.RouteTable, src model.Source) string { v.Source = src; return v.Name })
		doc.Routes, problems = join(doc.Routes, items), append(problems, errs...)
		doc.Identities.Routes = join(doc.Identities.Routes, ids)
	case "listeners":
		items, ids, errs := decodeItems(w, c, path, "listener", val, func(v *model.Listener, src model.Source) string { v.Source = src; return v.Name })
		doc.Listeners, problems = join(doc.Listeners, items), append(problems, errs...)
		doc.Identities.Listeners = join(doc.Identities.Listeners, ids)
	case "secrets":
		items, _, errs := decodeItems(w, c, path, "secret", val, func(v *model.Secret, src model.Source) string { v.Source = src; return v.Name })
		doc.Secrets, problems = join(doc.Secrets, items), append(problems, errs...)
	case "grpc":
		items, _, errs := decodeItems(w, c, path, "grpc target", val, func(v *model.GRPCTarget, src model.Source) string { v.Source = src; return v.Target })
		doc.GRPC, problems = join(doc.GRPC, items), append(problems, errs...)
	case "endpoints":
		items, _, errs := decodeItems(w, c, path, "endpoint", val, func(v *Endpoint, src model.Source) string { v.File, v.Line = src.File, src.Line; return v.Service })
		doc.Endpoints, problems = join(doc.Endpoints, items), append(problems, errs...)
	case "tests":
		items, _, errs := decodeItems(w, c, path, "route test", val, func(v *RouteTest, src model.Source) string { v.File, v.Line = src.File, src.Line; return v.Name })
		doc.Tests, problems = join(doc.Tests, items), append(problems, errs...)
	default:
		problems = append(problems, diag.Diagnostic{File: path, Line: key.Line, Field: shortName(key.Value), Message: "unknown top-level key (version 1 knows version, resources, groups, services, endpoints, routes, listeners, secrets, grpc and tests)"})
	}
	return problems
}

// join is to with from appended: from itself when to is empty (the
// first file's list is the document's, not copied into another).
func join[T any](to, from []T) []T {
	if len(to) == 0 {
		return from
	}
	return append(to, from...)
}

// VersionProblem is what is wrong with a document's version value, ""
// for nothing: it accepts exactly the integer 1 or the string "1" or "v1"
// (1.0, "1.0", [1] or 2 would be a guess at what the author meant). The
// admin API's apply asks it too, so a document reads the same either way.
func VersionProblem(val *yaml.Node) string {
	if val.Kind == yaml.ScalarNode {
		switch {
		case val.Tag == "!!int" && val.Value == "1",
			val.Tag == "!!str" && (val.Value == "1" || val.Value == "v1"):
			return ""
		}
		return fmt.Sprintf("unsupported config version %q (this Pylon reads version 1: write `version: 1`)", shortName(val.Value))
	}
	return "must be the number 1, not a list or a mapping"
}

// decodeItems decodes a list of model objects strictly: an unknown field or
// a value of the wrong type is an error naming the object and the field.
// set records each object's source and returns its name. An item that is
// raw JSON (rawItems) is looked up in c before it is parsed. ids are the
// objects' Identities, one an object (zero for one not decoded through c).
func decodeItems[T any](w *jsonWriter, c *Cache, path, kind string, val *yaml.Node, set func(*T, model.Source) string) (out []T, ids []Identity, problems diag.List) {
	if val.Kind == yaml.ScalarNode && val.Tag == "!!null" {
		return nil, nil, nil
	}
	if val.Kind != yaml.SequenceNode {
		return nil, nil, diag.List{{File: path, Line: val.Line, Message: "must be a list of " + kind + "s"}}
	}
	out = make([]T, 0, len(val.Content))
	ids = make([]Identity, 0, len(val.Content))
	for i, item := range val.Content {
		raw := ""
		if item.Tag == rawJSONTag {
			raw = item.Value
			if v, id, ok := cached[T](c, kind, raw); ok {
				// Placed in out, not in v: v's address taken would put
				// every item's copy on the heap.
				out, ids = append(out, v), append(ids, id)
				set(&out[len(out)-1], model.Source{File: path, Line: item.Line})
				continue
			}
			if v, ok := decodeJSONItem(raw, model.Source{File: path, Line: item.Line}, set); ok {
				out, ids = append(out, v), append(ids, c.put(kind, raw, v))
				continue
			}
			// Refused, or not plainly JSON: the item's YAML tree gives
			// its diagnostics their fields' lines.
			full, err := yamlOf([]byte(raw), item.Line)
			if err != nil {
				problems = append(problems, diag.Diagnostic{File: path, Line: item.Line, Type: kind, Name: fmt.Sprintf("#%d", i), Message: err.Error()})
				continue
			}
			item = full
		}
		v, errs := decodeItem(w, path, kind, i, item, set)
		if len(errs) > 0 {
			problems = append(problems, errs...)
			continue
		}
		var id Identity
		if raw != "" {
			id = c.put(kind, raw, v)
		}
		out, ids = append(out, v), append(ids, id)
	}
	return out, ids, problems
}

// loadDecodedEndpoints adds the endpoints f holds decoded (File.Endpoints)
// to doc, each with f's path and its item's line, as decoding f.Data
// would. An endpoint decoding would refuse (its service's name missing or
// not a name) adds nothing and returns false: f.Data is then decoded,
// for the diagnostics.
func loadDecodedEndpoints(f File, doc *Document) bool {
	placed := true // every File and Line set already
	for i, e := range f.Endpoints {
		if e.Service == "" || nameProblem(e.Service) != "" {
			return false
		}
		placed = placed && e.File == f.Path && e.Line == i+1
	}
	if placed && len(doc.Endpoints) == 0 {
		// Shared, never written: a later file's endpoints are appended
		// to a copy.
		doc.Endpoints = slices.Clip(f.Endpoints)
		return true
	}
	doc.Endpoints = slices.Grow(doc.Endpoints, len(f.Endpoints))
	for i, e := range f.Endpoints {
		e.File, e.Line = f.Path, i+1
		doc.Endpoints = append(doc.Endpoints, e)
	}
	return true
}

// decodeItem decodes the i-th object of a list.
func decodeItem[T any](w *jsonWriter, path, kind string, i int, item *yaml.Node, set func(*T, model.Source) string) (T, diag.List) {
	var zero T
	d := diag.Diagnostic{File: path, Line: item.Line, Type: kind, Name: fmt.Sprintf("#%d", i)}
	if item.Kind != yaml.MappingNode {
		d.Message = "must be a mapping"
		return zero, diag.List{d}
	}
	for _, k := range []string{"name", "target"} {
		if n := stringValue(item, k); n != "" {
			d.Name = shortName(n)
		}
	}
	js, err := w.encode(item)
	if err != nil {
		d.Message = err.Error()
		return zero, diag.List{d}
	}
	v, errs := decodeStrict[T](js, item, d)
	if len(errs) > 0 {
		return zero, errs
	}
	name := set(&v, model.Source{File: path, Line: item.Line})
	d.Field = "name"
	switch kind {
	case "grpc target":
		d.Field = "target"
	case "endpoint":
		d.Field = "service"
	}
	if name == "" {
		d.Message = "missing"
		return zero, diag.List{d}
	}
	if msg := nameProblem(name); msg != "" {
		d.Name, d.Message = shortName(name), msg
		return zero, diag.List{d}
	}
	return v, nil
}

// maxErrorsPerObject bounds the diagnostics one object can produce.
const maxErrorsPerObject = 16

// decodeStrict decodes one model object from its JSON form, refusing unknown
// fields. encoding/json stops at the first error; to report every mistake
// in the object at once, the offending field is dropped and the object
// decoded again, up to maxErrorsPerObject times. Each diagnostic starts from
// base and names the field and its line in item.
func decodeStrict[T any](js []byte, item *yaml.Node, base diag.Diagnostic) (T, diag.List) {
	var problems diag.List
	for range maxErrorsPerObject {
		var v T
		dec := json.NewDecoder(bytes.NewReader(js))
		dec.DisallowUnknownFields()
		err := dec.Decode(&v)
		if err == nil {
			return v, problems
		}
		d := base
		var drop func(any) bool
		d.Field, d.Message, drop = explainJSON(err)
		if d.Field == "" {
			// A value's own error (a bad duration) quotes the value but
			// not the field: find the value in the object.
			if m := quotedValue().FindStringSubmatch(d.Message); m != nil {
				if k, l := findValue(item, m[1]); l > 0 {
					d.Field, d.Line = k, l
					drop = dropWhere(func(key string, val any) bool { return key == k && val == m[1] })
				}
			}
		} else if _, l := findKeyLine(item, lastField(d.Field)); l > 0 {
			d.Line = l
		}
		problems = append(problems, d)
		if drop == nil {
			break
		}
		var raw any
		if json.Unmarshal(js, &raw) != nil || !drop(raw) {
			break // nothing dropped: decoding again would repeat the error
		}
		if js, err = json.Marshal(raw); err != nil {
			break
		}
	}
	// Re-encoding reorders keys: report in the file's order.
	slices.SortStableFunc(problems, func(a, b diag.Diagnostic) int { return a.Line - b.Line })
	var zero T
	return zero, problems
}

// decodeResource turns one list item into its Envoy message.
func decodeResource(reg *xdstype.Registry, w *jsonWriter, path string, node *yaml.Node) (xdstype.Resource, *diag.Diagnostic) {
	d := &diag.Diagnostic{File: path, Line: node.Line}
	if node.Kind != yaml.MappingNode {
		d.Message = "a resource must be a mapping with an \"@type\""
		return xdstype.Resource{}, d
	}
	typeURL := stringValue(node, "@type")
	if typeURL == "" {
		d.Field = "@type"
		d.Message = "missing; every resource names its Envoy v3 type, e.g. " + xdstype.ClusterURL
		return xdstype.Resource{}, d
	}
	t := reg.Lookup(typeURL)
	if t == nil {
		d.Field = "@type"
		d.Message = fmt.Sprintf("unknown resource type %q", typeURL)
		return xdstype.Resource{}, d
	}
	d.Type = t.Kind
	name := nameFrom(node, t)
	d.Name = shortName(name)
	var ttl time.Duration
	if v := mapValue(node, "@ttl"); v != nil {
		var err error
		if ttl, err = time.ParseDuration(v.Value); err != nil || ttl <= 0 || v.Kind != yaml.ScalarNode {
			d.Field, d.Line = "@ttl", v.Line
			// Not quoted: a raw resource's values are never echoed.
			d.Message = "not a positive duration such as \"30s\""
			return xdstype.Resource{}, d
		}
		if ttl < MinTTL {
			// Heartbeats go to every stream holding it at half its TTL.
			d.Field, d.Line = "@ttl", v.Line
			d.Message = fmt.Sprintf("%v: at least %v (Pylon refreshes it at half its TTL, to every proxy holding it)", ttl, MinTTL)
			return xdstype.Resource{}, d
		}
	}
	js, err := w.encode(node, "@type", "@ttl")
	if err != nil {
		d.Message = err.Error()
		return xdstype.Resource{}, d
	}
	msg := t.New()
	if err := (protojson.UnmarshalOptions{}).Unmarshal(js, msg); err != nil {
		d.Field, d.Message, d.Line = explainProtoJSON(err, deepNode(node))
		return xdstype.Resource{}, d
	}
	if name == "" {
		d.Field = t.NameField()
		d.Message = "missing; every resource needs a name"
		return xdstype.Resource{}, d
	}
	if msg := nameProblem(name); msg != "" {
		d.Field, d.Name, d.Message = t.NameField(), shortName(name), msg
		return xdstype.Resource{}, d
	}
	// The name is a piece of the file's text on the JSON path: a copy
	// lets the text go once the file is decoded.
	return xdstype.Resource{Type: t, Name: strings.Clone(name), Message: msg, TTL: ttl, File: path, Line: node.Line}, nil
}

// nameFrom reads the resource name before full decoding so that even a
// resource that fails to decode is named in its error.
func nameFrom(n *yaml.Node, t *xdstype.Type) string {
	field := t.NameField()
	if s := stringValue(n, field); s != "" {
		return s
	}
	return stringValue(n, lowerCamel(field))
}

// mapValue returns the value of key in the mapping n, or nil; a key the
// mapping does not set itself is looked up in what it merges ("<<").
func mapValue(n *yaml.Node, key string) *yaml.Node {
	return mapValueDepth(n, key, 0)
}

func mapValueDepth(n *yaml.Node, key string, depth int) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if depth > maxDepth {
		return nil
	}
	if n.Kind == yaml.SequenceNode { // a merge of several mappings
		for _, c := range n.Content {
			if v := mapValueDepth(c, key, depth+1); v != nil {
				return v
			}
		}
		return nil
	}
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if k.Kind == yaml.ScalarNode && k.Tag == "!!merge" {
			merges = append(merges, n.Content[i+1])
			continue
		}
		if k.Kind == yaml.ScalarNode && k.Value == key {
			return n.Content[i+1]
		}
	}
	for _, m := range merges {
		if v := mapValueDepth(m, key, depth+1); v != nil {
			return v
		}
	}
	return nil
}

// stringValue returns the string value of key in the mapping n, or "".
func stringValue(n *yaml.Node, key string) string {
	if v := mapValue(n, key); v != nil && v.Kind == yaml.ScalarNode && v.ShortTag() == "!!str" {
		return v.Value
	}
	return ""
}

func lowerCamel(s string) string {
	parts := strings.Split(s, "_")
	for i := 1; i < len(parts); i++ {
		if parts[i] != "" {
			parts[i] = strings.ToUpper(parts[i][:1]) + parts[i][1:]
		}
	}
	return strings.Join(parts, "")
}
