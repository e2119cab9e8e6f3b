package admin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/pylon-xds/pylon/internal/configstore"
	"github.com/pylon-xds/pylon/internal/diag"
	"github.com/pylon-xds/pylon/internal/model"
	"github.com/pylon-xds/pylon/internal/redact"
	rolloutctl "github.com/pylon-xds/pylon/internal/rollout"
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

// maxDiagnostics bounds the diagnostics a refusal answers with (the first,
// and their total): a document with a mistake in each of many objects has
// as many.
const maxDiagnostics = 1000

// apiError is the one shape of every /v1 error.
type apiError struct {
	Error       string            `json:"error"`
	Diagnostics []diag.Diagnostic `json:"diagnostics,omitempty"`
	// DiagnosticsTotal counts them all when more than maxDiagnostics.
	DiagnosticsTotal int `json:"diagnosticsTotal,omitempty"`
}

// badRequest is an input the API refuses before it reaches the store.
func badRequest(format string, args ...any) error {
	return &configstore.ValidationError{Err: fmt.Errorf(format, args...)}
}

// fail maps an error to its status: 400 for a config that does not
// validate (with the same diagnostics a file gets), 409 for a stale
// revision, 404 for what does not exist, 413 for a body over its bound or
// a change too large for one store transaction (nothing stored),
// 415 for a body type the API does not read, 503 for a store that cannot
// be reached, 500 for a store that fails.
// The text is redacted: a decoding error may quote the body, and the body
// may hold a key.
func fail(w http.ResponseWriter, err error) {
	body := apiError{Error: redact.String(err.Error())}
	code := http.StatusInternalServerError
	var dl diag.List
	var tooBig *http.MaxBytesError
	var unsupported errUnsupportedType
	switch {
	case errors.As(err, &tooBig):
		code = http.StatusRequestEntityTooLarge
		body.Error = fmt.Sprintf("the body is limited to %d bytes", tooBig.Limit)
	case errors.As(err, &unsupported):
		code = http.StatusUnsupportedMediaType
	case errors.Is(err, store.ErrTooLarge):
		// The store refused the commit whole, for its size: nothing was
		// written, and the same request will be refused again.
		code = http.StatusRequestEntityTooLarge
	case errors.Is(err, configstore.ErrInvalid):
		code = http.StatusBadRequest
		if errors.As(err, &dl) {
			body.Diagnostics = dl
			if len(dl) > maxDiagnostics {
				body.Diagnostics, body.DiagnosticsTotal = dl[:maxDiagnostics], len(dl)
			}
		}
	case errors.Is(err, store.ErrUnavailable):
		// Nothing is wrong with the request: the store's backend cannot
		// be reached now; a retry may succeed.
		code = http.StatusServiceUnavailable
		w.Header().Set("Retry-After", "1")
	case errors.Is(err, store.ErrConflict), errors.Is(err, rolloutctl.ErrHalted):
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
	var err error
	if p.dryRun, err = boolParam(r, "dryRun"); err != nil {
		return p, err
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

// boolParam is a query parameter that is true, false or absent.
func boolParam(r *http.Request, name string) (bool, error) {
	switch v := r.URL.Query().Get(name); v {
	case "", "false":
		return false, nil
	case "true":
		return true, nil
	default:
		return false, badRequest("%s: %q is not true or false", name, truncate(v))
	}
}

// revisionOf is a revision number given as the {rev} path value or a
// query parameter.
func revisionOf(what, v string) (int64, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return 0, badRequest("%s: %q is not a revision number", what, truncate(v))
	}
	return n, nil
}

// pathRevision is the {rev} of a history or rollback path.
func pathRevision(r *http.Request) (int64, error) {
	return revisionOf("revision", r.PathValue("rev"))
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

// historyEntry is a history entry with who wrote it, when this replica
// knows (written through it since it started).
type historyEntry struct {
	store.Entry
	By string `json:"by,omitempty"`
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

// api serves /v1. Reads need the read (or write) token, writes the write
// token and are audited; in file mode (no config service) writes are
// refused.
type api struct {
	o   Options
	g   guard
	who *authors
}

func (a api) cfg() *configstore.Service { return a.o.Config }

// read guards a read.
func (a api) read(h http.HandlerFunc) http.HandlerFunc {
	return a.g.read(func(w http.ResponseWriter, r *http.Request) {
		if a.o.Config == nil {
			writeJSON(w, http.StatusNotFound, apiError{Error: "file mode: the config comes from --config; see GET /config"})
			return
		}
		h(w, r)
	})
}

// write guards a config write, bounds its body and logs it as an audit
// line. A change to a group whose rollout is halted is refused unless it
// supersedes it.
func (a api) write(limit int64, h http.HandlerFunc) http.HandlerFunc {
	return a.writing(limit, true, h)
}

// writeEndpoints is write for endpoint registrations, renewals and
// removals: runtime state, not rolled out (every node gets the current
// endpoints whatever its stage), so a halted rollout does not hold them
// up; a lease must be renewable while the rollout waits for an operator.
func (a api) writeEndpoints(limit int64, h http.HandlerFunc) http.HandlerFunc {
	return a.writing(limit, false, h)
}

func (a api) writing(limit int64, gated bool, h http.HandlerFunc) http.HandlerFunc {
	return a.g.write(audited(a.o.logger(), a.who, func(w http.ResponseWriter, r *http.Request) {
		if a.o.Config == nil {
			writeJSON(w, http.StatusMethodNotAllowed, apiError{Error: "read-only: this Pylon serves the config files given with --config or --config-git; change those files instead"})
			return
		}
		var superseded []string
		if gated {
			superseded = a.haltedGate(r)
		}
		r.Body = http.MaxBytesReader(w, r.Body, limit)
		sw := &statusWriter{ResponseWriter: w}
		h(sw, r)
		rec, _ := r.Context().Value(auditKey{}).(*auditRecord)
		a.supersedeFailed(superseded, rec != nil && rec.recorded, sw.code)
	}))
}

// registerAPI adds the /v1 config API.
func registerAPI(mux *http.ServeMux, g guard, who *authors) {
	a := api{o: g.o, g: g, who: who}
	a.registerReads(mux)
	a.registerObjectWrites(mux)
	a.registerEndpoints(mux)
	a.registerEndpointPut(mux)
}

func (a api) registerReads(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/objects", a.read(func(w http.ResponseWriter, r *http.Request) {
		objs, rev, err := a.cfg().Store().List(r.Context())
		if err != nil {
			fail(w, err)
			return
		}
		respond(w, r, http.StatusOK, map[string]any{"revision": rev, "objects": views(objs)})
	}))
	mux.HandleFunc("GET /v1/objects/{kind}/{name}", a.read(func(w http.ResponseWriter, r *http.Request) {
		p, err := parse(r)
		if err != nil {
			fail(w, err)
			return
		}
		obj, err := a.cfg().Store().Get(r.Context(), p.key)
		if err != nil {
			fail(w, err)
			return
		}
		respond(w, r, http.StatusOK, view(obj))
	}))
	mux.HandleFunc("GET /v1/history", a.read(func(w http.ResponseWriter, r *http.Request) {
		h, err := a.cfg().Store().History(r.Context())
		if err != nil {
			fail(w, err)
			return
		}
		out := make([]historyEntry, len(h))
		for i, e := range h {
			e.Summary = redact.String(e.Summary)
			out[i] = historyEntry{Entry: e, By: a.who.get(e.Revision)}
		}
		respond(w, r, http.StatusOK, map[string]any{"history": out})
	}))
	mux.HandleFunc("GET /v1/history/{rev}", a.read(func(w http.ResponseWriter, r *http.Request) {
		n, err := pathRevision(r)
		if err != nil {
			fail(w, err)
			return
		}
		e, err := a.cfg().Store().At(r.Context(), n)
		if err != nil {
			fail(w, err)
			return
		}
		respond(w, r, http.StatusOK, entry{Revision: e.Revision, At: e.At, Summary: redact.String(e.Summary), Version: e.Version, Objects: views(e.Objects)})
	}))
	mux.HandleFunc("GET /v1/diff", a.read(a.diff))
}

// registerObjectWrites adds the object writes: POST creates (409 if it
// exists); PUT replaces, at ?revision= when given (409 when stale); DELETE
// removes, likewise; apply writes a document; rollback a past revision.
func (a api) registerObjectWrites(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/objects/{kind}/{name}", a.commitOne(http.StatusCreated, "create", true, func(params) int64 { return -1 }))
	mux.HandleFunc("PUT /v1/objects/{kind}/{name}", a.commitOne(http.StatusOK, "replace", true, func(p params) int64 { return p.revision }))
	mux.HandleFunc("DELETE /v1/objects/{kind}/{name}", a.commitOne(http.StatusOK, "delete", false, func(p params) int64 { return p.revision }))
	mux.HandleFunc("POST /v1/apply", a.write(maxBody, a.apply))
	mux.HandleFunc("POST /v1/rollback/{rev}", a.write(maxBody, func(w http.ResponseWriter, r *http.Request) {
		p, err := parse(r)
		var n int64
		if err == nil {
			n, err = pathRevision(r)
		}
		var res configstore.Result
		if err == nil {
			noteChanges(r, fmt.Sprintf("rollback to revision %d", n))
			res, err = a.cfg().Rollback(r.Context(), n, p.dryRun)
		}
		if err != nil {
			fail(w, err)
			return
		}
		noteResult(r, res)
		writeJSON(w, http.StatusOK, res)
	}))
}

// commitOne writes one object. A body must be one object of the path's
// kind that names itself as the path does.
func (a api) commitOne(code int, verb string, withBody bool, revision func(params) int64) http.HandlerFunc {
	return a.write(maxBody, func(w http.ResponseWriter, r *http.Request) {
		p, err := parse(r)
		var b []byte
		if err == nil && withBody {
			if b, err = readBody(r, maxBody); err == nil {
				err = configstore.CheckKey(a.o.Registry, p.key, b)
			}
		}
		if err != nil {
			fail(w, err)
			return
		}
		noteChanges(r, p.key.Kind+"/"+p.key.Name)
		res, err := a.cfg().Commit(r.Context(), []store.Change{{Key: p.key, Body: b, Revision: revision(p)}}, verb+" "+p.key.Kind+"/"+p.key.Name, p.dryRun)
		if err != nil {
			fail(w, err)
			return
		}
		noteResult(r, res)
		writeJSON(w, code, res)
	})
}

// apply writes a config document. The document is read as YAML, which
// JSON is a subset of, so both body types read the same; another type is
// refused. With ?prune=true the document becomes the whole config of the
// kinds it names: what the store has of them and the document lacks is
// deleted in the same revision.
func (a api) apply(w http.ResponseWriter, r *http.Request) {
	p, err := parse(r)
	if err == nil {
		_, err = contentFormat(r)
	}
	var b []byte
	if err == nil {
		b, err = io.ReadAll(r.Body)
	}
	var prune bool
	if err == nil {
		prune, err = boolParam(r, "prune")
	}
	file := fileParam(r)
	var doc configstore.Document
	if err == nil {
		doc, err = configstore.ReadDocument(a.o.Registry, b)
	}
	var res configstore.Result
	if err == nil {
		keys := make([]string, len(doc.Changes))
		for i, c := range doc.Changes {
			keys[i] = c.Kind + "/" + c.Name
		}
		noteChanges(r, keys...)
		summary := "apply " + strconv.Itoa(len(doc.Changes)) + " object(s)"
		if !prune {
			res, err = a.cfg().Commit(r.Context(), doc.Changes, summary, p.dryRun)
		} else {
			res, err = a.cfg().Prune(r.Context(), doc, summary+", prune "+strings.Join(doc.Kinds, ", "), p.dryRun)
		}
	}
	if err == nil {
		// What changed, and a prune's deletions (worked out against the
		// store at commit time), from the result: a refused write's
		// line keeps the document's objects, what it tried.
		noteObjects(r, res.Objects)
	}
	if err != nil {
		fail(w, doc.Place(err, file))
		return
	}
	noteResult(r, res)
	writeJSON(w, http.StatusOK, res)
}

// fileParam is ?file=, the name of the document the client read (pylon
// apply sends it as given), for diagnostics to name, shown only to this
// client (a refused write is not stored). Any name is taken, sanitized:
// each character that is not printable (a tab, a newline, a non-ASCII
// space) becomes "?", and a name over maxKey bytes keeps its end (the
// file's own name) after "...". A file's name is never a reason to refuse
// its document.
func fileParam(r *http.Request) string {
	f := strings.Map(func(c rune) rune {
		if !unicode.IsPrint(c) {
			return '?'
		}
		return c
	}, r.URL.Query().Get("file"))
	if len(f) > maxKey {
		cut := len(f) - (maxKey - 3)
		for cut < len(f) && !utf8.RuneStart(f[cut]) {
			cut++
		}
		f = "..." + f[cut:]
	}
	return f
}

func (a api) registerEndpoints(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/services/{name}/endpoints", a.writeEndpoints(maxEndpointBody, func(w http.ResponseWriter, r *http.Request) {
		req, ttl, err := endpointRequest(r)
		if err != nil {
			fail(w, err)
			return
		}
		a.register(w, r, req, ttl)
	}))
	mux.HandleFunc("DELETE /v1/services/{name}/endpoints/{addr}", a.writeEndpoints(maxBody, func(w http.ResponseWriter, r *http.Request) {
		host, port, err := hostPort(r.PathValue("addr"))
		if err != nil {
			fail(w, err)
			return
		}
		noteChanges(r, "endpoints."+r.PathValue("name")+"/"+r.PathValue("addr"))
		res, err := a.cfg().Deregister(r.Context(), r.PathValue("name"), host, port)
		if err != nil {
			fail(w, err)
			return
		}
		noteResult(r, res)
		writeJSON(w, http.StatusOK, res)
	}))
}

// hostPort splits an endpoint written ADDRESS:PORT, an IPv6 address in
// brackets ([::1]:8080).
func hostPort(s string) (string, uint32, error) {
	host, portStr, err := net.SplitHostPort(s)
	var port uint64
	if err == nil {
		port, err = strconv.ParseUint(portStr, 10, 16)
	}
	if err != nil || host == "" || port == 0 || len(host) > maxKey {
		return "", 0, badRequest("%q is not an endpoint: ADDRESS:PORT, an IPv6 address in brackets ([::1]:8080)", truncate(s))
	}
	return host, uint32(port), nil
}

// endpointRequest decodes an endpoint registration: one object, JSON or
// YAML, with no field the API does not know ("tll" for "ttl" is refused,
// not read as no lease). A permanent endpoint is registered by leaving ttl
// out; a ttl must be positive. The address may carry the port
// ("[::1]:8080", "10.0.0.1:80") when the port field is left out.
func endpointRequest(r *http.Request) (model.Endpoint, time.Duration, error) {
	var req struct {
		model.Endpoint
		TTL *string `json:"ttl,omitempty"`
	}
	b, err := readBody(r, maxEndpointBody)
	if err != nil {
		return model.Endpoint{}, 0, err
	}
	if err := strictJSON(b, &req); err != nil {
		return model.Endpoint{}, 0, badRequest("the body must be one endpoint (address, port, and optionally ttl, weight, health, region, zone, sub_zone, priority): %v", err)
	}
	if req.Port == 0 {
		if host, port, err := hostPort(req.Address); err == nil {
			req.Address, req.Port = host, port
		}
	}
	var ttl time.Duration
	if req.TTL != nil {
		if ttl, err = time.ParseDuration(*req.TTL); err != nil || ttl <= 0 || ttl > 24*time.Hour {
			return model.Endpoint{}, 0, badRequest("ttl: %q is not a positive duration up to 24h such as \"30s\" (leave ttl out for an endpoint without a lease)", truncate(*req.TTL))
		}
	}
	return req.Endpoint, ttl, nil
}

// strictJSON decodes one JSON value into v, refusing unknown fields and
// anything after the value.
func strictJSON(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("something follows the object")
	}
	return nil
}
