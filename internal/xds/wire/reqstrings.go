package wire

import (
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
)

// The string fields of a request, read by hand for SotW and delta ACKs
// alike (unmarshalSotW, unmarshalDelta).

// stringField is a string field of a message and where it goes: one for a
// singular field (the last given wins, as in proto), many for a repeated
// one (in order).
type stringField struct {
	num  protowire.Number
	one  *string
	many *[]string
	n    int // values seen (checkStrings)
}

// decodeStrings decodes the runs of b into fields when they hold nothing
// but those fields, well formed and valid UTF-8, and reports whether they
// did; otherwise it writes nothing. Every value is a piece of one string,
// one allocation for them all. It reads b twice, checking then decoding,
// rather than noting where the values are: the stream's goroutine reads
// with a stack kept small (see serveStream), and a request may name
// thousands of resources.
func decodeStrings(b []byte, runs [][2]int, fields []stringField) bool {
	size, ok := checkStrings(b, runs, fields)
	if !ok {
		return false
	}
	var all strings.Builder
	all.Grow(size)
	eachValue(b, runs, func(_ protowire.Number, v []byte) { all.Write(v) })
	text := all.String()
	for i := range fields {
		if f := &fields[i]; f.many != nil && f.n > 0 {
			*f.many = make([]string, 0, f.n)
		}
	}
	off := 0
	eachValue(b, runs, func(num protowire.Number, v []byte) {
		s := text[off : off+len(v)]
		off += len(v)
		f := fieldOf(fields, num)
		if f.many != nil {
			*f.many = append(*f.many, s)
		} else {
			*f.one = s
		}
	})
	return true
}

// checkStrings reports whether the runs of b hold only fields, each a
// well-formed string of valid UTF-8, counting each field's values: the
// bytes of the values together.
func checkStrings(b []byte, runs [][2]int, fields []stringField) (size int, ok bool) {
	for _, run := range runs {
		for i := run[0]; i < run[1]; {
			num, typ, tn := protowire.ConsumeTag(b[i:run[1]])
			if tn < 0 || typ != protowire.BytesType {
				return 0, false
			}
			f := fieldOf(fields, num)
			v, vn := protowire.ConsumeBytes(b[i+tn : run[1]])
			if f == nil || vn < 0 || !utf8.Valid(v) {
				return 0, false
			}
			f.n++
			size += len(v)
			i += tn + vn
		}
	}
	return size, true
}

// eachValue calls f with each field's number and value in the runs of b,
// which checkStrings found well formed.
func eachValue(b []byte, runs [][2]int, f func(protowire.Number, []byte)) {
	for _, run := range runs {
		for i := run[0]; i < run[1]; {
			num, _, tn := protowire.ConsumeTag(b[i:run[1]])
			v, vn := protowire.ConsumeBytes(b[i+tn : run[1]])
			f(num, v)
			i += tn + vn
		}
	}
}

func fieldOf(fields []stringField, num protowire.Number) *stringField {
	for i := range fields {
		if fields[i].num == num {
			return &fields[i]
		}
	}
	return nil
}
