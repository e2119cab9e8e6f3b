package bolt

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// An object's record is JSON, {"revision":N} or
// {"revision":N,"expires":"<RFC 3339>"} as encoding/json writes a meta.
// Every read and renewal of an endpoint decodes one and every write
// encodes one, so both are done by hand for that exact form; any other
// (a record written by hand, or by an older format) goes through
// encoding/json as before. The result is encoding/json's, byte for
// byte and value for value (TestMetaCodecAsJSON).

var (
	metaPrefix  = []byte(`{"revision":`)
	metaExpires = []byte(`,"expires":`)
)

// decodeMeta is json.Unmarshal of v into a meta.
func decodeMeta(v []byte) (meta, error) {
	if m, ok := decodeMetaFast(v); ok {
		return m, nil
	}
	var m meta
	err := json.Unmarshal(v, &m)
	return m, err
}

// decodeMetaFast decodes the form encodeMeta writes; ok is false for
// anything else.
func decodeMetaFast(v []byte) (m meta, ok bool) {
	rest, ok := bytes.CutPrefix(v, metaPrefix)
	if !ok {
		return m, false
	}
	i := 0
	for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
		i++
	}
	if i == 0 || i > 18 || i > 1 && rest[0] == '0' {
		return m, false
	}
	n, err := strconv.ParseInt(string(rest[:i]), 10, 64)
	if err != nil {
		return m, false
	}
	m.Revision = n
	tail := rest[i:]
	if len(tail) == 1 && tail[0] == '}' {
		return m, true
	}
	q, ok := bytes.CutPrefix(tail, metaExpires)
	if !ok || len(q) < 3 || q[len(q)-1] != '}' || q[0] != '"' || q[len(q)-2] != '"' {
		return m, false
	}
	q = q[:len(q)-1]
	if bytes.IndexByte(q[1:len(q)-1], '"') >= 0 || bytes.IndexByte(q, '\\') >= 0 {
		return m, false
	}
	if err := m.Expires.UnmarshalJSON(q); err != nil {
		return m, false
	}
	return m, true
}

// encodeMeta is json.Marshal of m.
func encodeMeta(m meta) ([]byte, error) {
	b := make([]byte, 0, 64)
	b = append(b, metaPrefix...)
	b = strconv.AppendInt(b, m.Revision, 10)
	if !m.Expires.IsZero() {
		t, err := m.Expires.MarshalJSON()
		if err != nil {
			// json.Marshal's error, wrapping the time's.
			return json.Marshal(m)
		}
		b = append(append(b, metaExpires...), t...)
	}
	return append(b, '}'), nil
}
