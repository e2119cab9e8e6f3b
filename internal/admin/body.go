package admin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"

	"sigs.k8s.io/yaml"
)

// bodyFormat is how a write's body is encoded, from its Content-Type.
type bodyFormat int

const (
	formatJSON bodyFormat = iota
	formatYAML
)

// errUnsupportedType is a Content-Type the API does not read: 415.
type errUnsupportedType struct{ got string }

func (e errUnsupportedType) Error() string {
	return fmt.Sprintf("Content-Type %q is not read: send application/json or application/yaml (also application/x-yaml, text/yaml)", e.got)
}

// contentFormat reads the request's Content-Type. No Content-Type is JSON,
// as it always was; a form (what curl -d sends by default) or anything else
// is refused rather than guessed at.
func contentFormat(r *http.Request) (bodyFormat, error) {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return formatJSON, nil
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return 0, errUnsupportedType{got: truncate(ct)}
	}
	switch mt {
	case "application/json":
		return formatJSON, nil
	case "application/yaml", "application/x-yaml", "text/yaml":
		return formatYAML, nil
	}
	return 0, errUnsupportedType{got: truncate(mt)}
}

// truncate bounds what an error quotes of a header.
func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// readBody reads a write's body (already bounded by a MaxBytesReader) and
// returns it as JSON: JSON as sent, YAML converted. The conversion is
// bounded too: YAML aliases can make JSON far larger than the YAML, so
// JSON over limit is refused like a body over it.
func readBody(r *http.Request, limit int64) ([]byte, error) {
	f, err := contentFormat(r)
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	if f == formatYAML {
		if b, err = yaml.YAMLToJSONStrict(b); err != nil {
			return nil, badRequest("the body is not valid YAML: %v", err)
		}
		if int64(len(b)) > limit {
			return nil, &http.MaxBytesError{Limit: limit}
		}
	}
	if !json.Valid(b) {
		return nil, badRequest("the body is not valid JSON (send YAML with Content-Type: application/yaml)")
	}
	return bytes.TrimSpace(b), nil
}
