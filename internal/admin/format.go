package admin

import (
	"encoding/json"
	"mime"
	"net/http"
	"strings"

	"sigs.k8s.io/yaml"
)

// wantsYAML reports whether a read asked for YAML: ?format=yaml, or an
// Accept header naming a YAML type (and ?format=json overriding it). Any
// other ?format is refused rather than ignored.
func wantsYAML(r *http.Request) (bool, error) {
	switch f := r.URL.Query().Get("format"); f {
	case "yaml":
		return true, nil
	case "json":
		return false, nil
	case "":
	default:
		return false, badRequest("format: %q is not json or yaml", truncate(f))
	}
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		mt, _, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		switch mt {
		case "application/yaml", "application/x-yaml", "text/yaml":
			return true, nil
		}
	}
	return false, nil
}

// respond writes a read's answer as JSON, or as YAML when asked. Errors
// stay JSON whatever was asked: one shape for every error.
func respond(w http.ResponseWriter, r *http.Request, code int, v any) {
	asYAML, err := wantsYAML(r)
	if err != nil {
		fail(w, err)
		return
	}
	if !asYAML {
		writeJSON(w, code, v)
		return
	}
	// Through JSON, so that the YAML has the JSON's field names and the
	// stored bodies (raw JSON) become YAML mappings.
	b, err := json.Marshal(v)
	if err == nil {
		b, err = yaml.JSONToYAML(b)
	}
	if err != nil {
		fail(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/yaml")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

// jsonErrors answers what the mux itself would answer in text/plain (no
// such route: 404; a route without this method: 405 with Allow) as the
// API's JSON error, so that a client reads one shape everywhere.
func jsonErrors(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, pattern := mux.Handler(r)
		if pattern != "" {
			mux.ServeHTTP(w, r)
			return
		}
		// The mux's own answer, recorded: its code and its Allow header.
		rec := &headerRecorder{header: http.Header{}}
		h.ServeHTTP(rec, r)
		switch rec.code {
		case http.StatusMethodNotAllowed:
			w.Header().Set("Allow", rec.header.Get("Allow"))
			writeJSON(w, rec.code, apiError{Error: r.Method + " is not served on this path; it serves " + rec.header.Get("Allow")})
		default:
			writeJSON(w, http.StatusNotFound, apiError{Error: "no such route: see docs for the admin API (/status, /proxies, /config, /v1/objects, /v1/history, /v1/diff, /v1/apply, /metrics, /healthz, /readyz)"})
		}
	})
}

// headerRecorder keeps a handler's status code and headers and drops its
// body.
type headerRecorder struct {
	header http.Header
	code   int
}

func (h *headerRecorder) Header() http.Header { return h.header }
func (h *headerRecorder) WriteHeader(code int) {
	if h.code == 0 {
		h.code = code
	}
}
func (h *headerRecorder) Write(b []byte) (int, error) {
	if h.code == 0 {
		h.code = http.StatusOK
	}
	return len(b), nil
}
