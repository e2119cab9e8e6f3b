package admin

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/pylon-xds/pylon/internal/configstore"
	"github.com/pylon-xds/pylon/internal/diag"
	"github.com/pylon-xds/pylon/internal/model"
	"github.com/pylon-xds/pylon/internal/store"
)

// maxBody bounds a write's body.
const maxBody = 16 << 20

// apiError is the one shape of every /v1 error.
type apiError struct {
	Error       string            `json:"error"`
	Diagnostics []diag.Diagnostic `json:"diagnostics,omitempty"`
}

// fail maps an error to its status: 400 for a config that does not
// validate (with the same diagnostics a file gets), 409 for a stale
// revision, 404 for what does not exist.
func fail(w http.ResponseWriter, err error) {
	body := apiError{Error: err.Error()}
	code := http.StatusInternalServerError
	var dl diag.List
	switch {
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

// registerAPI adds the /v1 config API. Reads are open; writes need the
// bearer token, and in file mode (no config service) are refused.
func registerAPI(mux *http.ServeMux, o Options) {
	read := func(h http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if o.Config == nil {
				writeJSON(w, http.StatusNotFound, apiError{Error: "file mode: the config comes from --config; see GET /config"})
				return
			}
			h(w, r)
		}
	}
	write := func(h http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if o.Config == nil {
				writeJSON(w, http.StatusMethodNotAllowed, apiError{Error: "read-only: this Pylon serves the config files given with --config; change those files instead"})
				return
			}
			got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !ok || o.Token == "" || subtle.ConstantTimeCompare([]byte(got), []byte(o.Token)) != 1 {
				writeJSON(w, http.StatusUnauthorized, apiError{Error: "writes need Authorization: Bearer <token> (the token is in the data folder's admin-token file)"})
				return
			}
			r.Body = http.MaxBytesReader(w, r.Body, maxBody)
			h(w, r)
		}
	}
	dry := func(r *http.Request) bool { return r.URL.Query().Get("dryRun") == "true" }
	rev := func(r *http.Request) int64 {
		v, _ := strconv.ParseInt(r.URL.Query().Get("revision"), 10, 64)
		return v
	}
	key := func(r *http.Request) store.Key {
		return store.Key{Kind: r.PathValue("kind"), Name: r.PathValue("name")}
	}
	body := func(r *http.Request) ([]byte, error) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, &configstore.ValidationError{Err: err}
		}
		if !json.Valid(b) {
			return nil, &configstore.ValidationError{Err: errors.New("the body must be a JSON object")}
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
		writeJSON(w, http.StatusOK, map[string]any{"revision": rev, "objects": objs})
	}))
	mux.HandleFunc("GET /v1/objects/{kind}/{name}", read(func(w http.ResponseWriter, r *http.Request) {
		obj, err := o.Config.Store().Get(ctx(r), key(r))
		if err != nil {
			fail(w, err)
			return
		}
		writeJSON(w, http.StatusOK, obj)
	}))
	// POST creates (409 if it exists); PUT replaces, at ?revision= when
	// given (409 when stale); DELETE removes, likewise.
	mux.HandleFunc("POST /v1/objects/{kind}/{name}", write(func(w http.ResponseWriter, r *http.Request) {
		b, err := body(r)
		if err == nil {
			var res configstore.Result
			res, err = o.Config.Commit(ctx(r), []store.Change{{Key: key(r), Body: b, Revision: -1}}, "create "+r.PathValue("kind")+"/"+r.PathValue("name"), dry(r))
			if err == nil {
				writeJSON(w, http.StatusCreated, res)
				return
			}
		}
		fail(w, err)
	}))
	mux.HandleFunc("PUT /v1/objects/{kind}/{name}", write(func(w http.ResponseWriter, r *http.Request) {
		b, err := body(r)
		if err == nil {
			var res configstore.Result
			res, err = o.Config.Commit(ctx(r), []store.Change{{Key: key(r), Body: b, Revision: rev(r)}}, "replace "+r.PathValue("kind")+"/"+r.PathValue("name"), dry(r))
			if err == nil {
				writeJSON(w, http.StatusOK, res)
				return
			}
		}
		fail(w, err)
	}))
	mux.HandleFunc("DELETE /v1/objects/{kind}/{name}", write(func(w http.ResponseWriter, r *http.Request) {
		res, err := o.Config.Commit(ctx(r), []store.Change{{Key: key(r), Revision: rev(r)}}, "delete "+r.PathValue("kind")+"/"+r.PathValue("name"), dry(r))
		if err != nil {
			fail(w, err)
			return
		}
		writeJSON(w, http.StatusOK, res)
	}))
	mux.HandleFunc("POST /v1/apply", write(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			fail(w, &configstore.ValidationError{Err: err})
			return
		}
		changes, err := configstore.Objects(o.Registry, b)
		if err != nil {
			fail(w, err)
			return
		}
		res, err := o.Config.Commit(ctx(r), changes, "apply "+strconv.Itoa(len(changes))+" object(s)", dry(r))
		if err != nil {
			fail(w, err)
			return
		}
		writeJSON(w, http.StatusOK, res)
	}))
	mux.HandleFunc("POST /v1/services/{name}/endpoints", write(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			model.Endpoint
			TTL string `json:"ttl,omitempty"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			fail(w, &configstore.ValidationError{Err: err})
			return
		}
		var ttl time.Duration
		if req.TTL != "" {
			var err error
			if ttl, err = time.ParseDuration(req.TTL); err != nil || ttl <= 0 {
				fail(w, &configstore.ValidationError{Err: errors.New("ttl: a positive duration such as \"30s\"")})
				return
			}
		}
		res, err := o.Config.Register(ctx(r), r.PathValue("name"), req.Endpoint, ttl)
		if err != nil {
			fail(w, err)
			return
		}
		writeJSON(w, http.StatusOK, res)
	}))
	mux.HandleFunc("DELETE /v1/services/{name}/endpoints/{addr}", write(func(w http.ResponseWriter, r *http.Request) {
		host, portStr, ok := strings.Cut(r.PathValue("addr"), ":")
		port, err := strconv.ParseUint(portStr, 10, 16)
		if !ok || err != nil {
			fail(w, &configstore.ValidationError{Err: errors.New("the endpoint is ADDRESS:PORT")})
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
		writeJSON(w, http.StatusOK, map[string]any{"history": h})
	}))
	mux.HandleFunc("GET /v1/history/{rev}", read(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.ParseInt(r.PathValue("rev"), 10, 64)
		e, err := o.Config.Store().At(ctx(r), n)
		if err != nil {
			fail(w, err)
			return
		}
		writeJSON(w, http.StatusOK, e)
	}))
	mux.HandleFunc("POST /v1/rollback/{rev}", write(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.ParseInt(r.PathValue("rev"), 10, 64)
		res, err := o.Config.Rollback(ctx(r), n, dry(r))
		if err != nil {
			fail(w, err)
			return
		}
		writeJSON(w, http.StatusOK, res)
	}))
}
