package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/pylon-xds/pylon/internal/configstore"
	"github.com/pylon-xds/pylon/internal/diag"
	"github.com/pylon-xds/pylon/internal/model"
	"github.com/pylon-xds/pylon/internal/redact"
	"github.com/pylon-xds/pylon/internal/store"
)

// Write bodies are bounded: a whole config document for apply and object
// writes, one small JSON object for an endpoint registration.
const (
	maxBody         = 16 << 20
	maxEndpointBody = 64 << 10
	// maxKey bounds a path's kind and name before anything is looked up.
	maxKey = 512
)

// apiError is the one shape of every /v1 error.
type apiError struct {
	Error       string            `json:"error"`
	Diagnostics []diag.Diagnostic `json:"diagnostics,omitempty"`
}

// badRequest is an input the API refuses before it reaches the store.
func badRequest(format string, args ...any) error {
	return &configstore.ValidationError{Err: fmt.Errorf(format, args...)}
}

// fail maps an error to its status: 400 for a config that does not
// validate (with the same diagnostics a file gets), 409 for a stale
// revision, 404 for what does not exist, 413 for a body over its bound,
// 500 for a store that fails. The text is redacted: a decoding error may
// quote the body, and the body may hold a key.
func fail(w http.ResponseWriter, err error) {
	body := apiError{Error: redact.String(err.Error())}
	code := http.StatusInternalServerError
	var dl diag.List
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		code = http.StatusRequestEntityTooLarge
		body.Error = fmt.Sprintf("the body is limited to %d bytes", tooBig.Limit)
	case errors.Is(err, configstore.ErrInvalid):
		code = http.StatusBadRequest
		if errors.As(err, &dl) {
			body.Diagnostics = dl
		}
	case errors.Is(err, store.ErrConflict):
		code = http.StatusConflict
	case errors.Is(err, store.ErrNotFound):
		code = http.StatusNotFound
	}
	writeJSON(w, code, body)
}

// params are a request's checked query parameters and path values.
type params struct {
	dryRun   bool
	revision int64
	key      store.Key
}

// parse checks the query and path: a parameter that does not parse is
// refused, not read as its zero value (a mistyped ?revision= would
// otherwise write without the check the caller asked for).
func parse(r *http.Request) (params, error) {
	var p params
	q := r.URL.Query()
	switch v := q.Get("dryRun"); v {
	case "", "false":
	case "true":
		p.dryRun = true
	default:
		return p, badRequest("dryRun: %q is not true or false", v)
	}
	if v := q.Get("revision"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < -1 {
			return p, badRequest("revision: %q is not a revision number", v)
		}
		p.revision = n
	}
	p.key = store.Key{Kind: r.PathValue("kind"), Name: r.PathValue("name")}
	if len(p.key.Kind) > maxKey || len(p.key.Name) > maxKey {
		return p, badRequest("the kind and the name are limited to %d bytes", maxKey)
	}
	return p, nil
}

// pathRevision is the {rev} of a history or rollback path.
func pathRevision(r *http.Request) (int64, error) {
	n, err := strconv.ParseInt(r.PathValue("rev"), 10, 64)
	if err != nil || n <= 0 {
		return 0, badRequest("%q is not a revision number", r.PathValue("rev"))
	}
	return n, nil
}

// object is a stored object as the API shows it: the body as JSON (what
// was written, redacted), not the base64 a []byte would marshal to.
type object struct {
	store.Key
	Body     json.RawMessage `json:"body"`
	Revision int64           `json:"revision"`
	Expires  time.Time       `json:"expires,omitzero"`
}

// entry is a history entry as the API shows it.
type entry struct {
	Revision int64     `json:"revision"`
	At       time.Time `json:"at"`
	Summary  string    `json:"summary"`
	Version  string    `json:"version"`
	Objects  []object  `json:"objects,omitempty"`
}

// view is o redacted, for the API.
func view(o store.Object) object {
	b := redact.JSON(o.Body)
	if !json.Valid(b) {
		// Written before bodies were checked: shown as text, scrubbed.
		b, _ = json.Marshal(redact.String(string(o.Body)))
	}
	return object{Key: o.Key, Body: b, Revision: o.Revision, Expires: o.Expires}
}

// views redacts objects for the API.
func views(objs []store.Object) []object {
	out := make([]object, len(objs))
	for i, o := range objs {
		out[i] = view(o)
	}
	return out
}

// registerAPI adds the /v1 config API. Reads need the read (or write)
// token, writes the write token; in file mode (no config service) writes
// are refused.
func registerAPI(mux *http.ServeMux, g guard) {
	o := g.o
	read := func(h http.HandlerFunc) http.HandlerFunc {
		return g.read(func(w http.ResponseWriter, r *http.Request) {
			if o.Config == nil {
				writeJSON(w, http.StatusNotFound, apiError{Error: "file mode: the config comes from --config; see GET /config"})
				return
			}
			h(w, r)
		})
	}
	writeLimited := func(limit int64, h http.HandlerFunc) http.HandlerFunc {
		return g.write(func(w http.ResponseWriter, r *http.Request) {
			if o.Config == nil {
				writeJSON(w, http.StatusMethodNotAllowed, apiError{Error: "read-only: this Pylon serves the config files given with --config; change those files instead"})
				return
			}
			r.Body = http.MaxBytesReader(w, r.Body, limit)
			h(w, r)
		})
	}
	write := func(h http.HandlerFunc) http.HandlerFunc { return writeLimited(maxBody, h) }
	body := func(r *http.Request) ([]byte, error) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		if !json.Valid(b) {
			return nil, badRequest("the body must be a JSON object")
		}
		return b, nil
	}
	ctx := func(r *http.Request) context.Context { return r.Context() }

	mux.HandleFunc("GET /v1/objects", read(func(w http.ResponseWriter, r *http.Request) {
		objs, rev, err := o.Config.Store().List(ctx(r))
		if err != nil {
			fail(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"revision": rev, "objects": views(objs)})
	}))
	mux.HandleFunc("GET /v1/objects/{kind}/{name}", read(func(w http.ResponseWriter, r *http.Request) {
		p, err := parse(r)
		if err != nil {
			fail(w, err)
			return
		}
		obj, err := o.Config.Store().Get(ctx(r), p.key)
		if err != nil {
			fail(w, err)
			return
		}
		writeJSON(w, http.StatusOK, view(obj))
	}))
	// POST creates (409 if it exists); PUT replaces, at ?revision= when
	// given (409 when stale); DELETE removes, likewise.
	commitOne := func(code int, verb string, withBody bool, revision func(params) int64) http.HandlerFunc {
		return write(func(w http.ResponseWriter, r *http.Request) {
			p, err := parse(r)
			var b []byte
			if err == nil && withBody {
				b, err = body(r)
			}
			if err != nil {
				fail(w, err)
				return
			}
			res, err := o.Config.Commit(ctx(r), []store.Change{{Key: p.key, Body: b, Revision: revision(p)}}, verb+" "+p.key.Kind+"/"+p.key.Name, p.dryRun)
			if err != nil {
				fail(w, err)
				return
			}
			writeJSON(w, code, res)
		})
	}
	mux.HandleFunc("POST /v1/objects/{kind}/{name}", commitOne(http.StatusCreated, "create", true, func(params) int64 { return -1 }))
	mux.HandleFunc("PUT /v1/objects/{kind}/{name}", commitOne(http.StatusOK, "replace", true, func(p params) int64 { return p.revision }))
	mux.HandleFunc("DELETE /v1/objects/{kind}/{name}", commitOne(http.StatusOK, "delete", false, func(p params) int64 { return p.revision }))
	mux.HandleFunc("POST /v1/apply", write(func(w http.ResponseWriter, r *http.Request) {
		p, err := parse(r)
		var b []byte
		if err == nil {
			b, err = io.ReadAll(r.Body)
		}
		var changes []store.Change
		if err == nil {
			changes, err = configstore.Objects(o.Registry, b)
		}
		var res configstore.Result
		if err == nil {
			res, err = o.Config.Commit(ctx(r), changes, "apply "+strconv.Itoa(len(changes))+" object(s)", p.dryRun)
		}
		if err != nil {
			fail(w, err)
			return
		}
		writeJSON(w, http.StatusOK, res)
	}))
	mux.HandleFunc("POST /v1/services/{name}/endpoints", writeLimited(maxEndpointBody, func(w http.ResponseWriter, r *http.Request) {
		req, ttl, err := endpointRequest(r)
		if err != nil {
			fail(w, err)
			return
		}
		res, err := o.Config.Register(ctx(r), r.PathValue("name"), req, ttl)
		if err != nil {
			fail(w, err)
			return
		}
		writeJSON(w, http.StatusOK, res)
	}))
	mux.HandleFunc("DELETE /v1/services/{name}/endpoints/{addr}", write(func(w http.ResponseWriter, r *http.Request) {
		host, portStr, ok := strings.Cut(r.PathValue("addr"), ":")
		port, err := strconv.ParseUint(portStr, 10, 16)
		if !ok || err != nil || len(host) > maxKey {
			fail(w, badRequest("the endpoint is ADDRESS:PORT"))
			return
		}
		res, err := o.Config.Deregister(ctx(r), r.PathValue("name"), host, uint32(port))
		if err != nil {
			fail(w, err)
			return
		}
		writeJSON(w, http.StatusOK, res)
	}))
	mux.HandleFunc("GET /v1/history", read(func(w http.ResponseWriter, r *http.Request) {
		h, err := o.Config.Store().History(ctx(r))
		if err != nil {
			fail(w, err)
			return
		}
		for i := range h {
			h[i].Summary = redact.String(h[i].Summary)
		}
		writeJSON(w, http.StatusOK, map[string]any{"history": h})
	}))
	mux.HandleFunc("GET /v1/history/{rev}", read(func(w http.ResponseWriter, r *http.Request) {
		n, err := pathRevision(r)
		if err != nil {
			fail(w, err)
			return
		}
		e, err := o.Config.Store().At(ctx(r), n)
		if err != nil {
			fail(w, err)
			return
		}
		writeJSON(w, http.StatusOK, entry{Revision: e.Revision, At: e.At, Summary: redact.String(e.Summary), Version: e.Version, Objects: views(e.Objects)})
	}))
	mux.HandleFunc("POST /v1/rollback/{rev}", write(func(w http.ResponseWriter, r *http.Request) {
		p, err := parse(r)
		var n int64
		if err == nil {
			n, err = pathRevision(r)
		}
		var res configstore.Result
		if err == nil {
			res, err = o.Config.Rollback(ctx(r), n, p.dryRun)
		}
		if err != nil {
			fail(w, err)
			return
		}
		writeJSON(w, http.StatusOK, res)
	}))
}

// endpointRequest decodes an endpoint registration: one JSON object.
func endpointRequest(r *http.Request) (model.Endpoint, time.Duration, error) {
	var req struct {
		model.Endpoint
		TTL string `json:"ttl,omitempty"`
	}
	dec := json.NewDecoder(r.Body)
	if err := dec.Decode(&req); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return model.Endpoint{}, 0, err
		}
		return model.Endpoint{}, 0, badRequest("the body must be one endpoint as a JSON object: %v", err)
	}
	if dec.More() {
		return model.Endpoint{}, 0, badRequest("the body must be one endpoint as a JSON object, with nothing after it")
	}
	var ttl time.Duration
	if req.TTL != "" {
		var err error
		if ttl, err = time.ParseDuration(req.TTL); err != nil || ttl <= 0 || ttl > 24*time.Hour {
			return model.Endpoint{}, 0, badRequest("ttl: a positive duration up to 24h such as \"30s\"")
		}
	}
	return req.Endpoint, ttl, nil
}
