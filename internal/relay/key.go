package relay

import (
	"fmt"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/pylon-xds/pylon/internal/nodegroup"
)

// DefaultKey is the key template without --key: one upstream stream per
// node cluster.
const DefaultKey = "{cluster}"

// Template is a parsed --key: literal text and node fields.
type Template struct {
	src   string
	parts []part
}

// part is literal text or, with field set, a node field.
type part struct {
	text  string
	field string // "cluster", "locality.region", "locality.zone", "locality.sub_zone", "metadata.NAME"
}

// maxKeyLen bounds a key: it names a node group, a file and the upstream
// node's id.
const maxKeyLen = 256

// ParseTemplate parses a key template: literal text and {cluster},
// {locality.region}, {locality.zone}, {locality.sub_zone} and
// {metadata.NAME}. {id} is refused: a key per proxy would be a stream per
// proxy, which is what a relay is for not having.
func ParseTemplate(s string) (Template, error) {
	t := Template{src: s}
	rest := s
	for rest != "" {
		i := strings.IndexByte(rest, '{')
		if i < 0 {
			t.parts = append(t.parts, part{text: rest})
			break
		}
		if i > 0 {
			t.parts = append(t.parts, part{text: rest[:i]})
		}
		j := strings.IndexByte(rest[i:], '}')
		if j < 0 {
			return Template{}, fmt.Errorf("--key %q: %q is not closed with }", s, rest[i:])
		}
		f := rest[i+1 : i+j]
		if err := checkField(f); err != nil {
			return Template{}, fmt.Errorf("--key %q: %w", s, err)
		}
		if n := len(t.parts); n > 0 && t.parts[n-1].field != "" {
			return Template{}, fmt.Errorf("--key %q: {%s} follows {%s} with nothing between: two proxies' different fields could make one key; put a separator between them", s, f, t.parts[n-1].field)
		}
		t.parts = append(t.parts, part{field: f})
		rest = rest[i+j+1:]
	}
	if len(t.Fields()) == 0 {
		return Template{}, fmt.Errorf("--key %q names no node field: every proxy would share one key; use {cluster}, {locality.zone} or {metadata.NAME}", s)
	}
	return t, nil
}

func checkField(f string) error {
	switch {
	case f == "id":
		return fmt.Errorf("{id} makes a key, and an upstream stream, per proxy; a relay aggregates proxies: use {cluster}, {locality.zone} or {metadata.NAME}")
	case f == "cluster", f == "locality.region", f == "locality.zone", f == "locality.sub_zone":
		return nil
	case strings.HasPrefix(f, "metadata.") && len(f) > len("metadata."):
		return nil
	}
	return fmt.Errorf("{%s} is not a key field: use {cluster}, {locality.region}, {locality.zone}, {locality.sub_zone} or {metadata.NAME}", f)
}

// String is the template as given.
func (t Template) String() string { return t.src }

// Fields are the node fields the template reads, in order.
func (t Template) Fields() []string {
	var out []string
	for _, p := range t.parts {
		if p.field != "" {
			out = append(out, p.field)
		}
	}
	return out
}

// Key is one key's name and the node fields that make it: the template's
// fields, or, with a Pylon upstream's group rules, the group's rule and
// the node announced upstream for it.
type Key struct {
	Name   string
	Values map[string]string // by template field
	Group  *nodegroup.Group
	As     *nodegroup.Node
}

// KeyOf is n's key. Every field the template reads must have a value: a
// group rule cannot say "empty", so a key with an empty field would take
// other keys' nodes.
func (t Template) KeyOf(n nodegroup.Node) (Key, error) {
	k := Key{Values: map[string]string{}}
	var b strings.Builder
	for _, p := range t.parts {
		if p.field == "" {
			b.WriteString(p.text)
			continue
		}
		v := fieldOf(n, p.field)
		if v == "" {
			return Key{}, fmt.Errorf("node %q has no %s, which the relay's key template %q needs", n.ID, p.field, t.src)
		}
		k.Values[p.field] = v
		b.WriteString(t.escape(v))
	}
	k.Name = b.String()
	if len(k.Name) > maxKeyLen {
		return Key{}, fmt.Errorf("node %q: its key is %d bytes long, past the relay's bound of %d", n.ID, len(k.Name), maxKeyLen)
	}
	return k, nil
}

// escape writes a field's value so that it cannot pass for the
// template's literal text: '%' and every character of that text become
// %XX, so that different values always make different keys (cluster
// "a/b" and role "c" against cluster "a" and role "b/c" under
// "{cluster}/{metadata.role}"). Values without them are written as is.
func (t Template) escape(v string) string {
	special := func(r rune) bool {
		if r == '%' {
			return true
		}
		for _, p := range t.parts {
			if p.field == "" && strings.ContainsRune(p.text, r) {
				return true
			}
		}
		return false
	}
	if !strings.ContainsFunc(v, special) {
		return v
	}
	var b strings.Builder
	for _, r := range v {
		if special(r) {
			for _, c := range []byte(string(r)) {
				fmt.Fprintf(&b, "%%%02X", c)
			}
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func fieldOf(n nodegroup.Node, f string) string {
	switch f {
	case "cluster":
		return n.Cluster
	case "locality.region":
		return n.Region
	case "locality.zone":
		return n.Zone
	case "locality.sub_zone":
		return n.SubZone
	}
	return n.Metadata[strings.TrimPrefix(f, "metadata.")]
}

// Match is the group rule taking the key's nodes: every field equal.
func (k Key) Match() nodegroup.Match {
	if k.Group != nil {
		return k.Group.Match
	}
	var m nodegroup.Match
	for f, v := range k.Values {
		switch f {
		case "cluster":
			m.Cluster = v
		case "locality.region":
			m.Region = v
		case "locality.zone":
			m.Zone = v
		case "locality.sub_zone":
			m.SubZone = v
		default:
			if m.Metadata == nil {
				m.Metadata = map[string]string{}
			}
			m.Metadata[strings.TrimPrefix(f, "metadata.")] = v
		}
	}
	return m
}

// ttlFeature is the client feature a key's upstream stream announces: it
// takes resources' TTLs (X41), which the relay serves its proxies with,
// and holds such a resource only while the upstream refreshes it
// (upstream/ttl.go).
const ttlFeature = "xds.config.supports-resource-ttl"

// Node is the node the relay announces upstream for the key: the key's
// fields, so that the upstream puts it where the key's proxies would be,
// and the relay's id.
func (k Key) Node(relayID string) *corev3.Node {
	if k.As != nil {
		return announced(*k.As)
	}
	m := k.Match()
	n := &corev3.Node{Id: relayID + "/" + k.Name, Cluster: m.Cluster, UserAgentName: "pylon-relay", ClientFeatures: []string{ttlFeature}}
	if m.Region != "" || m.Zone != "" || m.SubZone != "" {
		n.Locality = &corev3.Locality{Region: m.Region, Zone: m.Zone, SubZone: m.SubZone}
	}
	if len(m.Metadata) > 0 {
		fields := map[string]*structpb.Value{}
		for k, v := range m.Metadata {
			fields[k] = structpb.NewStringValue(v)
		}
		n.Metadata = &structpb.Struct{Fields: fields}
	}
	return n
}
