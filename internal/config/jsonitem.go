package config

import (
	"encoding/json"
	"strings"

	"github.com/pylon-xds/pylon/internal/model"
)

// decodeJSONItem decodes the raw JSON of one model object straight into
// its type, with no YAML tree in between: the common case of a JSON file
// (the store's objects, generated configs) costs a decode, not a YAML
// parse, a tree and a re-encoding (two thirds of what loading a large
// JSON file allocated). It answers only for an item the YAML path would
// decode to the same value and accept: plain JSON (printable ASCII,
// whose strings YAML reads as JSON does; each key on the line of its
// colon, and short), every key once per object, nested at most maxDepth,
// decoded strictly, with a good name. Anything
// else (a refusal included) reports false and takes the YAML path,
// whose diagnostics name each field's line; so the errors are the same
// either way.
func decodeJSONItem[T any](raw string, src model.Source, set func(*T, model.Source) string) (T, bool) {
	var zero T
	if len(raw) == 0 || raw[0] != '{' || !plainJSON(raw) {
		return zero, false
	}
	if _, ok := uniqueKeys(raw, 0, 0); !ok {
		return zero, false
	}
	var v T
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.DisallowUnknownFields()
	if dec.Decode(&v) != nil {
		return zero, false
	}
	name := set(&v, src)
	if name == "" || nameProblem(name) != "" {
		return zero, false
	}
	return v, true
}

// plainJSON reports whether the (valid) JSON text s is printable ASCII
// and JSON's whitespace, with no "\/" and no escaped UTF-16 surrogate:
// the text the YAML parser reads exactly as JSON does. (It refuses some
// characters JSON takes, DEL and the C1 controls among them, folds others
// as line breaks, and refuses those two escapes.)
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 0x20 && c < 0x7f, c == '\n', c == '\r', c == '\t':
		default:
			return false
		}
		if c != '\\' || i+1 >= len(s) {
			continue
		}
		i++ // an escaped character does not start an escape
		if s[i] == '/' || s[i] == 'u' && i+1 < len(s) && (s[i+1] == 'd' || s[i+1] == 'D') {
			return false
		}
	}
	return true
}

// uniqueKeys walks the (valid) JSON value at s[i] and returns its end,
// and false if an object in it sets a key twice (encoding/json would keep
// the last; the YAML path refuses it) or it nests deeper than maxDepth.
func uniqueKeys(s string, i, depth int) (int, bool) {
	if depth > maxDepth {
		return 0, false
	}
	switch s[i] {
	case '{':
		var keys keySet
		i = skipSpace(s, i+1)
		for i < len(s) && s[i] != '}' {
			end := skipValue(s, i)
			colon := skipSpace(s, end)
			if !keys.add(jsonString(s[i:end])) || !yamlKey(s[i:colon]) {
				return 0, false
			}
			var ok bool
			if i, ok = uniqueKeys(s, skipSpace(s, colon+1), depth+1); !ok {
				return 0, false
			}
			if i = skipSpace(s, i); i < len(s) && s[i] == ',' {
				i = skipSpace(s, i+1)
			}
		}
		return i + 1, true
	case '[':
		i = skipSpace(s, i+1)
		for i < len(s) && s[i] != ']' {
			var ok bool
			if i, ok = uniqueKeys(s, i, depth+1); !ok {
				return 0, false
			}
			if i = skipSpace(s, i); i < len(s) && s[i] == ',' {
				i = skipSpace(s, i+1)
			}
		}
		return i + 1, true
	}
	return skipValue(s, i), true
}

// yamlKey reports whether the YAML parser reads a key and the space
// after it (up to its colon) as JSON does: it refuses a key that is not
// on one line with its colon, or longer than about 1,024 characters (its
// limit on an implicit key; 1,000 is well within).
func yamlKey(s string) bool {
	return len(s) <= 1000 && !strings.ContainsAny(s, "\r\n")
}

// keySet is the keys of one object: a short list searched in place (most
// objects have a few keys), a map past that, so that an object of many
// keys costs no more than its size.
type keySet struct {
	list [16]string
	n    int
	many map[string]struct{}
}

// add adds k and reports whether it was new.
func (ks *keySet) add(k string) bool {
	if ks.many == nil && ks.n < len(ks.list) {
		for _, seen := range ks.list[:ks.n] {
			if seen == k {
				return false
			}
		}
		ks.list[ks.n] = k
		ks.n++
		return true
	}
	if ks.many == nil {
		ks.many = make(map[string]struct{}, 2*ks.n)
		for _, seen := range ks.list[:ks.n] {
			ks.many[seen] = struct{}{}
		}
	}
	if _, ok := ks.many[k]; ok {
		return false
	}
	ks.many[k] = struct{}{}
	return true
}
