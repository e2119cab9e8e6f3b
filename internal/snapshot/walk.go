package snapshot

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// walker visits the messages inside a resource that the value checks look
// at (regex matchers, durations, extension config sources, Anys) and no
// others: a field whose message type cannot hold one of them is not
// entered (an endpoint's address, its health check config: an LbEndpoint
// itself is entered, as its metadata can hold an Any). The field path of the
// message being visited is built only when asked for (path): formatting
// one for every element was most of the walk.
type walker struct {
	// holds says, per message type, whether it is or can hold a message
	// the checks look at.
	holds map[protoreflect.FullName]bool
	segs  []pathSeg
}

// pathSeg is one step of a field path: a field, or an element of one.
type pathSeg struct {
	field          string
	index          int                 // a list element, when isIndex
	key            protoreflect.MapKey // a map entry, when isKey
	isIndex, isKey bool
}

// newWalker walks with holds, what mayHold found so far: message types do
// not change, so a build shares one among all its resources.
func newWalker(holds map[protoreflect.FullName]bool) *walker { return &walker{holds: holds} }

// watched reports whether the checks look at messages named n.
func watched(n protoreflect.FullName) bool {
	switch n {
	case regexMatcherName, durationName, extensionSourceName, anyName:
		return true
	}
	return false
}

// mayHold reports whether a message of type d is or can hold a watched
// message, not counting what an Any holds (the checks decode an Any and
// walk what it holds separately): whether a watched type is reachable
// from d through message fields, recursive types included.
func (w *walker) mayHold(d protoreflect.MessageDescriptor) bool {
	if h, ok := w.holds[d.FullName()]; ok {
		return h
	}
	seen := map[protoreflect.FullName]bool{}
	h := w.reaches(d, seen)
	if !h {
		// Nothing reached from d reaches a watched type either.
		for n := range seen {
			w.holds[n] = false
		}
	}
	w.holds[d.FullName()] = h
	return h
}

// reaches is mayHold's search, seen holding the types visited.
func (w *walker) reaches(d protoreflect.MessageDescriptor, seen map[protoreflect.FullName]bool) bool {
	if h, ok := w.holds[d.FullName()]; ok {
		return h
	}
	if seen[d.FullName()] {
		return false
	}
	seen[d.FullName()] = true
	if watched(d.FullName()) {
		return true
	}
	fields := d.Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		if fd.IsMap() {
			fd = fd.MapValue()
		}
		if md := fd.Message(); md != nil && w.reaches(md, seen) {
			return true
		}
	}
	return false
}

// walk calls fn for every watched message set anywhere inside m, m
// excluded; it does not look inside an Any.
func (w *walker) walk(m protoreflect.Message, fn func(protoreflect.Message)) {
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		md := fd.Message()
		if fd.IsMap() {
			md = fd.MapValue().Message()
		}
		if md == nil || !w.mayHold(md) {
			return true
		}
		switch {
		case fd.IsList():
			l := v.List()
			for i := 0; i < l.Len(); i++ {
				w.visit(pathSeg{field: string(fd.Name()), index: i, isIndex: true}, l.Get(i).Message(), fn)
			}
		case fd.IsMap():
			v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				w.visit(pathSeg{field: string(fd.Name()), key: k, isKey: true}, mv.Message(), fn)
				return true
			})
		default:
			w.visit(pathSeg{field: string(fd.Name())}, v.Message(), fn)
		}
		return true
	})
}

func (w *walker) visit(seg pathSeg, v protoreflect.Message, fn func(protoreflect.Message)) {
	w.segs = append(w.segs, seg)
	if watched(v.Descriptor().FullName()) {
		fn(v)
	}
	if v.Descriptor().FullName() != anyName {
		w.walk(v, fn)
	}
	w.segs = w.segs[:len(w.segs)-1]
}

// path is the field path of the message being visited, e.g.
// "filter_chains[0].filters[1].typed_config".
func (w *walker) path() string {
	var b strings.Builder
	for i, s := range w.segs {
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(s.field)
		switch {
		case s.isIndex:
			fmt.Fprintf(&b, "[%d]", s.index)
		case s.isKey:
			fmt.Fprintf(&b, "[%v]", s.key.Interface())
		}
	}
	return b.String()
}
