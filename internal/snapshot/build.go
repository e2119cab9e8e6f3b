package snapshot

import (
	"crypto/sha256"
	"fmt"
	"strings"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	runtimev3 "github.com/envoyproxy/go-control-plane/envoy/service/runtime/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/pylon-xds/pylon/internal/diag"
	"github.com/pylon-xds/pylon/internal/redact"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// diagOf is a diagnostic about in, at its file and line.
func diagOf(in *xdstype.Resource, field, format string, args ...any) diag.Diagnostic {
	return diag.Diagnostic{File: in.File, Line: in.Line, Type: in.Type.Kind, Name: in.Name, Field: field, Message: fmt.Sprintf(format, args...)}
}

// marshal is the one encoding used for both the wire and the version hash.
var marshal = proto.MarshalOptions{Deterministic: true}

// Build validates the inputs and returns the snapshot they make. It checks,
// and refuses the whole set on, any of: a proto constraint violated (Envoy's
// generated ValidateAll, including inside nested typed_config), an xdstp://
// name not in canonical form (XdstpProblem), two resources of one type with
// one name, a reference to a resource that is not in the set, and a
// VirtualHost that its route configuration cannot serve by VHDS
// (vhdsProblems), key material outside a Secret (keyProblems). The error
// is a diag.List naming every problem.
func Build(reg *xdstype.Registry, inputs []xdstype.Resource) (*Snapshot, error) {
	return BuildValidated(reg, inputs, nil)
}

// BuildValidated is Build that skips validating the resources v saw pass
// in its previous builds (nil: validates everything).
func BuildValidated(reg *xdstype.Registry, inputs []xdstype.Resource, v *Validated) (*Snapshot, error) {
	defer v.done()
	var problems diag.List
	memo := v.takeMemo()
	defer v.giveMemo(memo)
	holds, keys := memo.holds, memo.keys
	byType := map[string]map[string]*Resource{}
	firstSeen := map[string]map[string]*xdstype.Resource{}
	// The maps sized at once: a thousand resources of a type would grow
	// them a dozen times.
	counts := map[string]int{}
	for i := range inputs {
		counts[inputs[i].Type.URL]++
	}
	for i := range inputs {
		in := &inputs[i]
		if byType[in.Type.URL] == nil {
			byType[in.Type.URL] = make(map[string]*Resource, counts[in.Type.URL])
			firstSeen[in.Type.URL] = make(map[string]*xdstype.Resource, counts[in.Type.URL])
		}
		if prev := firstSeen[in.Type.URL][in.Name]; prev != nil {
			problems = append(problems, diagOf(in, in.Type.NameField(), "duplicate name: already defined at %s", location(prev)))
			continue
		}
		firstSeen[in.Type.URL][in.Name] = in
		// The message's type is asked for an xdstp:// name only: every
		// build would otherwise reflect on every resource, changed or not.
		if strings.HasPrefix(in.Name, XdstpScheme) {
			if msg := XdstpProblem(in.Name, string(in.Message.ProtoReflect().Descriptor().FullName())); msg != "" {
				problems = append(problems, diagOf(in, in.Type.NameField(), "%s", msg))
			}
		}
		e, err := v.encode(in.Message)
		if err != nil {
			problems = append(problems, diagOf(in, "", "cannot encode: %v", err))
			continue
		}
		if r := e.res.reuse(reg, in); r != nil {
			byType[in.Type.URL][in.Name] = r
			continue
		}
		// An invalid resource still goes in the set: what names it is not
		// also reported as dangling.
		valid := validOnce(in, validKey{in.Type.URL, e.sum}, v, holds, keys, e.b, &problems)
		r, err := newResource(reg, in, e.b, e.sum)
		if err != nil {
			problems = append(problems, diagOf(in, "", "cannot encode: %v", err))
			continue
		}
		if valid {
			v.keepBuilt(reg, in, e, r)
		}
		byType[in.Type.URL][in.Name] = r
	}
	for i := range inputs {
		in := &inputs[i]
		if in.Type.Refs == nil || firstSeen[in.Type.URL][in.Name] != in {
			continue
		}
		var refs []xdstype.Ref
		if r := byType[in.Type.URL][in.Name]; r != nil {
			refs = r.Refs
		} else {
			refs = in.Type.Refs(in.Message)
		}
		problems = append(problems, refProblems(reg, in, refs, byType)...)
	}
	problems = append(problems, vhdsProblems(inputs, firstSeen, byType)...)
	if err := problems.Err(); err != nil {
		return nil, err
	}
	snap := newSnapshotAfter(reg, byType, v.lastSets())
	v.keepSets(snap)
	return snap, nil
}

// oneType is the type every ref is of, "" when they are of several or
// there are none.
func oneType(refs []xdstype.Ref) string {
	if len(refs) == 0 {
		return ""
	}
	for _, ref := range refs[1:] {
		if ref.TypeURL != refs[0].TypeURL {
			return ""
		}
	}
	return refs[0].TypeURL
}

// validOnce validates in (its key k, its encoding enc) unless v saw it
// pass before, adding its problems; it reports whether in is valid.
func validOnce(in *xdstype.Resource, k validKey, v *Validated, holds map[protoreflect.FullName]bool, keys *redact.Finder, enc []byte, problems *diag.List) bool {
	if v.seen(k) {
		return true
	}
	fes := append(validate(in.Message, holds), keyProblems(in, keys, enc)...)
	for _, fe := range fes {
		*problems = append(*problems, diagOf(in, fe.field, "%s", fe.reason))
	}
	if len(fes) == 0 {
		v.passed(k)
	}
	return len(fes) == 0
}

// newResource builds the encoded forms of a resource whose deterministic
// encoding is b, of SHA-256 sum, and reads what it names. A TTL is part of
// what the client receives, so it is part of the version: adding,
// changing or dropping it resends the resource. The Resource is complete
// when it is returned: builds share it (Validated) and never change it.
func newResource(reg *xdstype.Registry, in *xdstype.Resource, b []byte, sum [sha256.Size]byte) (*Resource, error) {
	r, err := encodedForms(in, b, sum)
	if err != nil || in.Type.Refs == nil {
		return r, err
	}
	r.Refs = in.Type.Refs(in.Message)
	for _, ref := range r.Refs {
		if t := reg.Lookup(ref.TypeURL); t != nil && t.MustPrecede {
			r.Precede = append(r.Precede, ref)
		}
	}
	r.precedeType = oneType(r.Precede)
	return r, nil
}

// encodedForms is newResource's Resource without what it names.
func encodedForms(in *xdstype.Resource, b []byte, sum [sha256.Size]byte) (*Resource, error) {
	enc := &anypb.Any{TypeUrl: in.Type.URL, Value: b}
	r := &Resource{Name: in.Name, Any: enc, Message: in.Message}
	if in.TTL <= 0 {
		r.Version = versionOf(sum)
		r.Delta = &discoveryv3.Resource{Name: in.Name, Version: r.Version, Resource: enc}
		return r, nil
	}
	r.TTL = durationpb.New(in.TTL)
	r.Version = hashBytes(append(append([]byte(nil), b...), []byte("\x00ttl="+in.TTL.String())...))
	r.Delta = &discoveryv3.Resource{Name: in.Name, Version: r.Version, Resource: enc, Ttl: r.TTL}
	r.plain = &discoveryv3.Resource{Name: in.Name, Version: r.Version, Resource: enc}
	r.heartbeat = &discoveryv3.Resource{Name: in.Name, Version: r.Version, Ttl: r.TTL}
	wrapped, err := anypb.New(r.Delta)
	if err != nil {
		return nil, err
	}
	r.wrapped = wrapped
	hb, err := anypb.New(r.heartbeat)
	if err != nil {
		return nil, err
	}
	r.heartbeatAny = hb
	return r, nil
}

func location(in *xdstype.Resource) string {
	if in.File == "" {
		return "an earlier entry"
	}
	if in.Line > 0 {
		return fmt.Sprintf("%s:%d", in.File, in.Line)
	}
	return in.File
}

type fieldError struct{ field, reason string }

// validate runs the generated ValidateAll on m and on every message packed in
// an Any inside it: protoc-gen-validate stops at Any, but Envoy validates a
// typed_config when it loads the extension, so Pylon must too.
func validate(m proto.Message, holds map[protoreflect.FullName]bool) []fieldError {
	var out []fieldError
	if v, ok := m.(interface{ ValidateAll() error }); ok {
		if err := v.ValidateAll(); err != nil {
			out = flatten("", err)
		}
	}
	if rt, ok := m.(*runtimev3.Runtime); ok {
		out = append(out, runtimeProblems("", rt.GetLayer())...)
	}
	if l, ok := m.(*listenerv3.Listener); ok {
		out = append(out, filterChainProblems(l)...)
	}
	// One walk over what m holds (an Any's content is validated on its
	// own, with the Any's path in front).
	w := newWalker(holds)
	w.walk(m.ProtoReflect(), func(v protoreflect.Message) {
		a, ok := v.Interface().(*anypb.Any)
		if !ok {
			out = append(out, valueProblems(w, v)...)
			return
		}
		inner, err := a.UnmarshalNew()
		if err != nil {
			out = append(out, fieldError{w.path(), fmt.Sprintf("cannot decode %s: %v", a.GetTypeUrl(), err)})
			return
		}
		for _, fe := range validate(inner, holds) {
			out = append(out, fieldError{joinPath(w.path(), fe.field), fe.reason})
		}
	})
	return out
}

var anyName = (&anypb.Any{}).ProtoReflect().Descriptor().FullName()

// pgvError is the shape of every protoc-gen-validate error.
type pgvError interface {
	Field() string
	Reason() string
	Cause() error
}

// flatten turns a nested protoc-gen-validate error into one entry per
// violated constraint, with a snake_case field path.
func flatten(prefix string, err error) []fieldError {
	if m, ok := err.(interface{ AllErrors() []error }); ok {
		var out []fieldError
		for _, e := range m.AllErrors() {
			out = append(out, flatten(prefix, e)...)
		}
		return out
	}
	if e, ok := err.(pgvError); ok {
		p := joinPath(prefix, snake(e.Field()))
		if c := e.Cause(); c != nil {
			switch c.(type) {
			case pgvError, interface{ AllErrors() []error }:
				return flatten(p, c)
			}
			return []fieldError{{p, e.Reason() + ": " + c.Error()}}
		}
		return []fieldError{{p, e.Reason()}}
	}
	return []fieldError{{prefix, err.Error()}}
}

func joinPath(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "." + b
}

// snake converts a Go field name such as "LbEndpoints[0]" to the proto field
// name "lb_endpoints[0]" that operators write; a bracketed key is kept as is.
func snake(s string) string {
	name, rest := s, ""
	if i := strings.IndexByte(s, '['); i >= 0 {
		name, rest = s[:i], s[i:]
	}
	var b strings.Builder
	for i, r := range name {
		if r >= 'A' && r <= 'Z' {
			if i > 0 {
				b.WriteByte('_')
			}
			b.WriteRune(r - 'A' + 'a')
			continue
		}
		b.WriteRune(r)
	}
	return b.String() + rest
}
