// Package admin serves Pylon's admin HTTP API: the config status, the
// connected proxies, health and readiness probes, and Go's profiler.
package admin

import (
	"encoding/json"
	"net/http"
	"net/http/pprof"

	"github.com/pylon-xds/pylon/internal/pipeline"
	"github.com/pylon-xds/pylon/internal/status"
)

// StatusSource reports what the pipeline last did.
type StatusSource interface {
	Status() pipeline.Status
}

// ProxySource lists the connected proxies.
type ProxySource interface {
	Streams() []status.Stream
}

// Options configures the handler.
type Options struct {
	Pipeline StatusSource
	Proxies  ProxySource
	// Identifier names this Pylon replica.
	Identifier string
	// Version is the Pylon build version.
	Version string
}

// statusBody is the JSON of GET /status.
type statusBody struct {
	Identifier string          `json:"identifier"`
	Version    string          `json:"pylonVersion"`
	Config     pipeline.Status `json:"config"`
}

// Handler returns the admin HTTP handler.
func Handler(o Options) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, statusBody{Identifier: o.Identifier, Version: o.Version, Config: o.Pipeline.Status()})
	})
	mux.HandleFunc("GET /proxies", func(w http.ResponseWriter, r *http.Request) {
		// Every connected stream with its node and group; a node in no
		// group shows "no matching group": it connects fine and receives
		// nothing, the failure this page exists to make visible.
		writeJSON(w, http.StatusOK, map[string]any{"streams": o.Proxies.Streams()})
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		// Ready once a config is being served. A refused later change does
		// not make Pylon unready: the last good config is still served.
		if o.Pipeline.Status().Version == "" {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "no config published yet"})
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	})
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	return mux
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
