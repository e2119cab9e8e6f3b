package redact

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

const (
	anyName        protoreflect.FullName = "google.protobuf.Any"
	dataSourceName protoreflect.FullName = "envoy.config.core.v3.DataSource"
)

// Message returns a copy of m with private key material replaced, at any
// depth and inside google.protobuf.Any (unpacked with the global registry,
// redacted, packed again). m itself is never changed. Secret DataSources
// keep their file name or environment variable name and lose inline
// contents; any other DataSource loses its inline contents when, decoded,
// they hold a private key (a certificate file with its key appended); a
// JWKS inline in jwt_authn's local_jwks loses its private members; secret
// strings and bytes become Redacted; a secret message (a private key
// provider's config) has every payload in it replaced; and a PEM private
// key anywhere else (a Lua script, a header value) is scrubbed by String.
func Message(m proto.Message) proto.Message {
	if m == nil {
		return nil
	}
	c := proto.Clone(m)
	(&walker{}).walk(c.ProtoReflect(), false)
	return c
}

// Finding is one place in a message where Message would take key
// material out. It never quotes the material.
type Finding struct {
	// Field is the field's path, e.g. "filter_chains[0].transport_socket
	// .typed_config.common_tls_context.tls_certificates[0].private_key
	// .inline_bytes" (an Any's content continues its typed_config's path).
	Field string
	// What the field holds: "private key material", "a JWKS private key"
	// or "a credential".
	What string
	// Remedy says how to give Envoy the same thing without serving it.
	Remedy string
}

// The remedies, by where the material sits.
const (
	remedyDataSource = "put it in a Secret and reference it with SDS (sds_config), or give Envoy a file (filename)"
	remedyJWKS       = "give Envoy the JWKS as a file (local_jwks.filename) or fetch it (remote_jwks)"
	remedyText       = "give Envoy a credential it reads from a file or a Secret instead"
)

// Inline lists the key material m holds: every field Message would
// change, by its path. It is the one rule of what may not be served
// outside a Secret (snapshot's output gate and render's check use it),
// and the same walk as Message's, so what a dump hides and what the
// gate refuses cannot disagree. m is not changed.
func Inline(m proto.Message) []Finding {
	return (&Finder{}).Inline(m, nil)
}

// Finder is Inline for many messages, faster: it learns once per message
// type whether the type can lead to a field that holds key material by
// what it is (a secret field, a DataSource, bytes, an Any, a JWKS), and
// when a message's encoding shows nothing that text holding a key would
// (a PEM header, "-----BEGIN" in base64, a DER key's base64), it leaves
// out the types that cannot. The zero value is ready; a Finder is not
// safe for concurrent use.
type Finder struct {
	reach map[protoreflect.FullName]bool
	plans map[protoreflect.FullName][]protoreflect.FieldDescriptor
	// w is the walker every Inline reuses: with its path buffer it is
	// most of a kilobyte, which a new one per resource allocated
	// (BenchmarkBuild1000Clusters).
	w walker
}

// Inline is the package's Inline, enc being m's encoding (nil: unknown).
func (f *Finder) Inline(m proto.Message, enc []byte) []Finding {
	if m == nil {
		return nil
	}
	w := &f.w
	*w = walker{dry: true, finder: f, noText: enc != nil && !mayHoldKeyBytes(enc)}
	w.walk(m.ProtoReflect(), false)
	found := w.found
	w.found = nil
	return found
}

// mayReach reports whether a message of type d can hold, through its
// message fields (an Any's content counted apart), a field that holds key
// material by what it is: learned once per type.
//
// Types can contain themselves (an RBAC Permission's and_rules, a
// MatchPredicate's and_match), so the answer is a fixed point: every type
// reachable from d is collected, those that hold key material directly
// are marked, and the marks are spread to the types that contain a marked
// one until nothing changes. A walk that cached "no" for a type met while
// one containing it was still being worked out would keep that "no" even
// when the outer type turned out to reach a key.
func (f *Finder) mayReach(d protoreflect.MessageDescriptor) bool {
	if r, ok := f.reach[d.FullName()]; ok {
		return r
	}
	if f.reach == nil {
		f.reach = map[protoreflect.FullName]bool{}
	}
	types, children := f.closure(d)
	reach := make(map[protoreflect.FullName]bool, len(types))
	for _, t := range types {
		reach[t.FullName()] = f.direct(t)
	}
	for changed := true; changed; {
		changed = false
		for _, t := range types {
			if reach[t.FullName()] {
				continue
			}
			for _, c := range children[t.FullName()] {
				if reach[c] || f.reach[c] {
					reach[t.FullName()], changed = true, true
					break
				}
			}
		}
	}
	for n, r := range reach {
		f.reach[n] = r
	}
	return reach[d.FullName()]
}

// closure lists d and every message type reachable from it through
// message fields (map values included) not already learned, with each
// type's message-typed fields' types.
func (f *Finder) closure(d protoreflect.MessageDescriptor) ([]protoreflect.MessageDescriptor, map[protoreflect.FullName][]protoreflect.FullName) {
	children := map[protoreflect.FullName][]protoreflect.FullName{d.FullName(): nil}
	types := []protoreflect.MessageDescriptor{d}
	for i := 0; i < len(types); i++ {
		fields := types[i].Fields()
		for j := range fields.Len() {
			fd := fields.Get(j)
			if fd.IsMap() {
				fd = fd.MapValue()
			}
			md := fd.Message()
			if md == nil {
				continue
			}
			name := types[i].FullName()
			children[name] = append(children[name], md.FullName())
			if _, seen := children[md.FullName()]; seen {
				continue
			}
			if _, learned := f.reach[md.FullName()]; learned {
				continue
			}
			children[md.FullName()] = nil
			types = append(types, md)
		}
	}
	return types, children
}

// direct reports whether type d holds key material itself: it is an Any or
// a DataSource, or one of its fields is secret by name, a JWKS, or bytes.
func (f *Finder) direct(d protoreflect.MessageDescriptor) bool {
	switch d.FullName() {
	case anyName, dataSourceName:
		return true
	}
	fields := d.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if fd.Name() == "local_jwks" || secretField(string(d.FullName()), string(fd.Name()), payload(fd)) {
			return true
		}
		if fd.IsMap() {
			fd = fd.MapValue()
		}
		if fd.Message() == nil && fd.Kind() == protoreflect.BytesKind {
			return true
		}
	}
	return false
}

// fieldReaches reports whether field fd of type d holds key material by
// what it is (a secret field, a JWKS, bytes) or leads to a type that can.
func (f *Finder) fieldReaches(d protoreflect.MessageDescriptor, fd protoreflect.FieldDescriptor) bool {
	if fd.Name() == "local_jwks" || secretField(string(d.FullName()), string(fd.Name()), payload(fd)) {
		return true
	}
	if fd.IsMap() {
		fd = fd.MapValue()
	}
	if md := fd.Message(); md != nil {
		return f.mayReach(md)
	}
	return fd.Kind() == protoreflect.BytesKind
}

// walker redacts a message in place, or with dry only finds what it
// would redact, keeping the path of the field it is in.
type walker struct {
	dry   bool
	segs  []seg
	buf   [16]seg // segs' first backing array: most paths are shorter
	found []Finding
	// finder, with noText: the encoding holds no text with a key, so only
	// the types finder says can reach key material are entered.
	finder *Finder
	noText bool
}

// fieldsOf are the fields of a message of type d to look at: all of them,
// unless the encoding shows no text that could hold a key (then only those
// that can hold key material by what they are, as the Finder learned).
func (w *walker) fieldsOf(d protoreflect.MessageDescriptor, all bool) []protoreflect.FieldDescriptor {
	if w.noText && !all {
		return w.finder.planOf(d)
	}
	fields := d.Fields()
	out := make([]protoreflect.FieldDescriptor, fields.Len())
	for i := range out {
		out[i] = fields.Get(i)
	}
	return out
}

// planOf are the fields of type d that can hold key material by what
// they are, or lead to one that can: learned once per type.
func (f *Finder) planOf(d protoreflect.MessageDescriptor) []protoreflect.FieldDescriptor {
	if p, ok := f.plans[d.FullName()]; ok {
		return p
	}
	if f.plans == nil {
		f.plans = map[protoreflect.FullName][]protoreflect.FieldDescriptor{}
	}
	p := []protoreflect.FieldDescriptor{}
	fields := d.Fields()
	for i := range fields.Len() {
		if fd := fields.Get(i); f.fieldReaches(d, fd) {
			p = append(p, fd)
		}
	}
	f.plans[d.FullName()] = p
	return p
}

// seg is one step of a field path: a field, a list index or a map key,
// formatted only when a finding needs it.
type seg struct {
	field string
	index int
	key   *protoreflect.MapKey
}

func (w *walker) push(s seg) {
	if w.segs == nil {
		w.segs = w.buf[:0]
	}
	w.segs = append(w.segs, s)
}
func (w *walker) pop() { w.segs = w.segs[:len(w.segs)-1] }

// report records a finding at the current path, plus leaf when given.
func (w *walker) report(leaf, what, remedy string) {
	var b strings.Builder
	for _, s := range w.segs {
		switch {
		case s.key != nil:
			fmt.Fprintf(&b, "[%v]", s.key.Interface())
		case s.field == "":
			fmt.Fprintf(&b, "[%d]", s.index)
		default:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(s.field)
		}
	}
	if leaf != "" {
		b.WriteString("." + leaf)
	}
	w.found = append(w.found, Finding{Field: b.String(), What: what, Remedy: remedy})
}

// walk redacts m; all says m sits under a secret field, so every
// payload in it is secret.
func (w *walker) walk(m protoreflect.Message, all bool) {
	if m.Descriptor().FullName() == anyName {
		w.walkAny(m, all)
		return
	}
	parent := string(m.Descriptor().FullName())
	if w.dry {
		// By the descriptor, not Range: Range's callback would be
		// allocated for every message walked.
		for _, fd := range w.fieldsOf(m.Descriptor(), all) {
			if !m.Has(fd) {
				continue
			}
			w.push(seg{field: string(fd.Name())})
			w.field(m, fd, m.Get(fd), w.secret(parent, fd, all))
			w.pop()
		}
		return
	}
	// Collect first: setting fields while ranging is not allowed.
	var fields []protoreflect.FieldDescriptor
	m.Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
		fields = append(fields, fd)
		return true
	})
	for _, fd := range fields {
		var v protoreflect.Value
		if fd.IsList() || fd.IsMap() || fd.Message() != nil {
			v = m.Mutable(fd)
		} else {
			v = m.Get(fd)
		}
		w.push(seg{field: string(fd.Name())})
		w.field(m, fd, v, w.secret(parent, fd, all))
		w.pop()
	}
}

// secret reports whether field fd of the message named parent holds key
// material, all saying the message sits under a secret field.
func (w *walker) secret(parent string, fd protoreflect.FieldDescriptor, all bool) bool {
	return all && !locators[string(fd.Name())] || secretField(parent, string(fd.Name()), payload(fd))
}

// field redacts one set field of m, of value v (mutable unless dry).
func (w *walker) field(m protoreflect.Message, fd protoreflect.FieldDescriptor, v protoreflect.Value, secret bool) {
	switch {
	case fd.IsList():
		l := v.List()
		for i := range l.Len() {
			w.push(seg{index: i})
			if r, ok := w.value(fd, l.Get(i), secret); ok && !w.dry {
				l.Set(i, r)
			}
			w.pop()
		}
	case fd.IsMap():
		mp := v.Map()
		vd := fd.MapValue()
		var keys []protoreflect.MapKey
		mp.Range(func(k protoreflect.MapKey, _ protoreflect.Value) bool {
			keys = append(keys, k)
			return true
		})
		for _, k := range keys {
			w.push(seg{key: &k})
			if r, ok := w.value(vd, mp.Get(k), secret); ok && !w.dry {
				mp.Set(k, r)
			}
			w.pop()
		}
	default:
		if r, ok := w.value(fd, v, secret); ok && !w.dry {
			m.Set(fd, r)
		}
	}
}

// payload says what a field's type can hold.
func payload(fd protoreflect.FieldDescriptor) payloadKind {
	if fd.IsMap() {
		fd = fd.MapValue()
	}
	switch fd.Kind() {
	case protoreflect.StringKind, protoreflect.BytesKind:
		return text
	case protoreflect.MessageKind:
		if fd.Message().FullName() == dataSourceName {
			return dataSource
		}
	}
	return noPayload
}

// what names the material a secret field holds, by the field's name.
func what(field string) string {
	if strings.Contains(field, "private_key") || field == "pkcs12" || field == "keys" {
		return "private key material"
	}
	return "a credential"
}

// value redacts one value of field fd: messages in place, scalars by
// returning the replacement (ok).
func (w *walker) value(fd protoreflect.FieldDescriptor, v protoreflect.Value, secret bool) (protoreflect.Value, bool) {
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		msg := v.Message()
		if msg.Descriptor().FullName() == dataSourceName {
			w.dataSource(msg, string(fd.Name()), secret)
			return v, false
		}
		w.walk(msg, secret)
		return v, false
	case protoreflect.StringKind:
		s := v.String()
		if secret && s != "" {
			w.report("", what(string(fd.Name())), remedyText)
			return protoreflect.ValueOfString(Redacted), true
		}
		if r := String(s); r != s {
			w.report("", "private key material", remedyText)
			return protoreflect.ValueOfString(r), true
		}
	case protoreflect.BytesKind:
		b := v.Bytes()
		if secret && len(b) > 0 {
			w.report("", what(string(fd.Name())), remedyText)
			return protoreflect.ValueOfBytes([]byte(Redacted)), true
		}
		if holdsKey(b) {
			w.report("", "private key material", remedyText)
			return protoreflect.ValueOfBytes([]byte(Redacted)), true
		}
		if r := Bytes(b); string(r) != string(b) {
			w.report("", "private key material", remedyText)
			return protoreflect.ValueOfBytes(r), true
		}
	}
	return v, false
}

// dataSource redacts a DataSource, the value of field name: its inline
// contents go when the field is secret or when, decoded, they hold a
// private key; a JWKS loses its private members. A file name or an
// environment variable name stays: where the key is, not what it is.
func (w *walker) dataSource(m protoreflect.Message, name string, secret bool) {
	fields := m.Descriptor().Fields()
	var fd protoreflect.FieldDescriptor
	var content []byte
	for _, n := range []protoreflect.Name{"inline_bytes", "inline_string"} {
		if f := fields.ByName(n); f != nil && m.Has(f) {
			fd = f
			if f.Kind() == protoreflect.BytesKind {
				content = m.Get(f).Bytes()
			} else {
				content = []byte(m.Get(f).String())
			}
		}
	}
	switch {
	case fd == nil || len(content) == 0:
		return
	case secret:
		w.report(string(fd.Name()), what(name), remedyDataSource)
	case name == "local_jwks":
		red, found := redactJWKS(content)
		if !found {
			return
		}
		w.report(string(fd.Name()), "a JWKS private key", remedyJWKS)
		if !w.dry {
			if fd.Kind() == protoreflect.BytesKind {
				m.Set(fd, protoreflect.ValueOfBytes(red))
			} else {
				m.Set(fd, protoreflect.ValueOfString(string(red)))
			}
		}
		return
	case holdsKey(content) || String(string(content)) != string(content):
		w.report(string(fd.Name()), "private key material", remedyDataSource)
	default:
		return
	}
	if !w.dry {
		m.Set(fields.ByName("inline_string"), protoreflect.ValueOfString(Redacted))
	}
}

// walkAny redacts inside an Any. A type this binary does not know cannot
// be walked: its bytes are dropped when they might hold a key (or sit
// under a secret field), since nothing can say which part is secret.
func (w *walker) walkAny(m protoreflect.Message, all bool) {
	fields := m.Descriptor().Fields()
	urlFD, valFD := fields.ByName("type_url"), fields.ByName("value")
	url, raw := m.Get(urlFD).String(), m.Get(valFD).Bytes()
	mt, err := protoregistry.GlobalTypes.FindMessageByURL(url)
	var inner proto.Message
	if err == nil {
		inner = mt.New().Interface()
		err = proto.Unmarshal(raw, inner)
	}
	if err != nil {
		if len(raw) > 0 && (all || mayHoldKeyBytes(raw) || derKey(raw)) {
			w.report("", "private key material (in a type Pylon cannot read)", remedyDataSource)
			if !w.dry {
				m.Clear(valFD)
			}
		}
		return
	}
	w.walk(inner.ProtoReflect(), all)
	if w.dry {
		return
	}
	out, err := proto.MarshalOptions{Deterministic: true}.Marshal(inner)
	if err != nil {
		m.Clear(valFD)
		return
	}
	m.Set(valFD, protoreflect.ValueOfBytes(out))
}
