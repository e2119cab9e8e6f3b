// Package xdsrest serves xDS as REST-JSON polling (rule X44): a
// DiscoveryRequest POSTed as JSON to /v3/discovery:<type>, answered with a
// DiscoveryResponse in proto3 canonical JSON, through the same protocol core
// as the gRPC streams.
package xdsrest

import (
	"log/slog"
	"net/http"

	"github.com/pylon-xds/pylon/internal/xds"
)

// Options configure a Handler.
type Options struct {
	Server *xds.Server
	Logger *slog.Logger
}

// Handler serves the REST-JSON xDS endpoints.
type Handler struct{ o Options }

// New returns a handler.
func New(o Options) *Handler { return &Handler{o: o} }

// ServeHTTP is not built yet.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	http.Error(w, "REST-JSON xDS is not built yet", http.StatusNotImplemented)
}
