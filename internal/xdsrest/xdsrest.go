// Package xdsrest serves xDS as REST-JSON polling (rule X44): a
// DiscoveryRequest POSTed as JSON to /v3/discovery:<type>, answered with a
// DiscoveryResponse in proto3 canonical JSON, through the same protocol core
// as the gRPC streams (node identity, groups, secret authorization,
// versions).
//
// It answers the way Envoy's REST subscription expects
// (source/extensions/config_subscription/rest/http_subscription_impl.cc and
// source/common/http/rest_api_fetcher.cc): Envoy POSTs its node, type_url,
// resource_names and the version_info it last accepted, never a nonce nor
// error_detail; 200 carries an update, 304 Not Modified means no change
// (no failure counted), and any other status is a failed fetch retried
// after refresh_delay. Each poll is a stream of its own in the core: it
// ends with the poll.
package xdsrest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/pylon-xds/pylon/internal/xds"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// Options configure a Handler.
type Options struct {
	Server   *xds.Server
	Registry *xdstype.Registry
	Logger   *slog.Logger
	// Wait is how long a poll whose client already holds what the core
	// would answer waits for a change (a long poll) before 304 Not
	// Modified. Zero answers at once: Envoy gives up on a poll after its
	// request_timeout (default 1s) and counts it as a failed update, so a
	// longer wait is only for clients whose request_timeout exceeds it.
	// At most MaxWait.
	Wait time.Duration
	// MaxPolls bounds the polls served at once (default 1024); beyond it
	// a poll gets 503 Service Unavailable with Retry-After.
	MaxPolls int
	// MaxBody bounds a request body (default 1 MiB).
	MaxBody int64
	// MaxResourceNames bounds resource_names (default 10,000, the xDS
	// server's default; give the server's value).
	MaxResourceNames int
	// AllowedHosts are names, beyond those always allowed (see
	// allowedHost), that polls may carry as their Host.
	AllowedHosts []string
}

// MaxWait bounds Options.Wait: a poll holds a slot and a stream for as
// long as it waits.
const MaxWait = 5 * time.Minute

// bodyTimeout bounds the reading of a poll's body (at most MaxBody); Envoy
// sends a DiscoveryRequest of a few hundred bytes at once.
const bodyTimeout = 2 * time.Second

// DefaultMaxPolls is Options.MaxPolls when none is given.
const DefaultMaxPolls = 1024

// Handler serves the REST-JSON xDS endpoints.
type Handler struct {
	o     Options
	log   *slog.Logger
	paths map[string]*xdstype.Type
	hosts allowedHosts
	list  string // the paths, for the error naming them
	polls chan struct{}
	// reading bounds the bodies read and decoded at once (MaxPolls and
	// readSpare, each at most MaxBody): apart from polls, so that a slow
	// sender holds a reading slot for at most bodyTimeout and never a
	// poll's, and a few of them cannot keep every poll out.
	reading chan struct{}
}

// New returns a handler.
func New(o Options) *Handler {
	if o.MaxPolls <= 0 {
		o.MaxPolls = DefaultMaxPolls
	}
	if o.MaxBody <= 0 {
		o.MaxBody = 1 << 20
	}
	if o.MaxResourceNames <= 0 {
		o.MaxResourceNames = 10000
	}
	o.Wait = min(max(o.Wait, 0), MaxWait)
	if o.Registry == nil {
		o.Registry = xdstype.New()
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := &Handler{o: o, log: log, paths: paths(o.Registry), hosts: newAllowedHosts(o.AllowedHosts), polls: make(chan struct{}, o.MaxPolls), reading: make(chan struct{}, o.MaxPolls+readSpare)}
	var list []string
	for p := range h.paths {
		list = append(list, p)
	}
	slices.Sort(list)
	h.list = strings.Join(list, ", ")
	return h
}

// Paths returns the REST paths served, sorted.
func (h *Handler) Paths() []string { return strings.Split(h.list, ", ") }

// ServeHTTP answers one poll.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// A response may hold private keys: no cache keeps it.
	w.Header().Set("Cache-Control", "no-store")
	switch {
	case !h.hosts.allowed(r.Host):
		h.fail(w, r, http.StatusMisdirectedRequest, fmt.Sprintf(hostError, bounded(r.Host)))
		return
	case fromPage(r):
		h.fail(w, r, http.StatusForbidden, originError)
		return
	}
	t := h.paths[r.URL.Path]
	if t == nil {
		h.fail(w, r, http.StatusNotFound, fmt.Sprintf("no REST xDS endpoint at %q; the endpoints are %s", bounded(r.URL.Path), h.list))
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		h.fail(w, r, http.StatusMethodNotAllowed, fmt.Sprintf("%s takes POST with a DiscoveryRequest in JSON", r.URL.Path))
		return
	}
	// Envoy sends application/json. Requiring it also keeps a web page
	// from posting here with a form (no CORS preflight for text/plain).
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		h.fail(w, r, http.StatusUnsupportedMediaType, "the body must be a DiscoveryRequest in JSON, with Content-Type: application/json")
		return
	}
	// The body is read before a poll slot is taken, within bodyTimeout:
	// a client trickling its body holds a connection, not one of the
	// slots real polls need.
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(bodyTimeout))
	if !h.take(w, r, h.reading, "requests being read") {
		return
	}
	req, code, msg := h.decode(w, r, t)
	<-h.reading
	if req == nil {
		h.fail(w, r, code, msg)
		return
	}
	if !h.take(w, r, h.polls, "polls") {
		return
	}
	defer func() { <-h.polls }()
	h.poll(w, r, t, req)
}

// readSpare is how many more bodies than polls may be read at once.
const readSpare = 16

// take takes a slot of slots without waiting, or answers 503 saying what
// there are too many of.
func (h *Handler) take(w http.ResponseWriter, r *http.Request, slots chan struct{}, what string) bool {
	select {
	case slots <- struct{}{}:
		return true
	default:
		w.Header().Set("Retry-After", "1")
		h.fail(w, r, http.StatusServiceUnavailable, fmt.Sprintf("more than %d %s at once; poll again later", cap(slots), what))
		return false
	}
}

// decode reads the request body into a DiscoveryRequest for t, or returns
// the status and message of why it cannot.
func (h *Handler) decode(w http.ResponseWriter, r *http.Request, t *xdstype.Type) (*discoveryv3.DiscoveryRequest, int, string) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.o.MaxBody))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return nil, http.StatusRequestEntityTooLarge, fmt.Sprintf("the request body is over %d bytes", h.o.MaxBody)
	case err != nil:
		return nil, http.StatusBadRequest, "reading the request body: " + err.Error()
	}
	req := &discoveryv3.DiscoveryRequest{}
	// Unknown fields are ignored, as gRPC's binary decoding does: a newer
	// Envoy may send fields this build does not know.
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(body, req); err != nil {
		return nil, http.StatusBadRequest, "the body is not a DiscoveryRequest in proto3 JSON: " + bounded(err.Error())
	}
	switch {
	case req.GetNode() == nil:
		return nil, http.StatusBadRequest, "the DiscoveryRequest has no node: every REST poll must carry it (it decides the proxy's group)"
	case req.GetTypeUrl() != "" && req.GetTypeUrl() != t.URL:
		return nil, http.StatusBadRequest, fmt.Sprintf("type_url %q does not match %s, which serves %s", bounded(req.GetTypeUrl()), r.URL.Path, t.URL)
	case len(req.GetResourceNames()) > h.o.MaxResourceNames:
		return nil, http.StatusBadRequest, fmt.Sprintf("resource_names has %d names; Pylon accepts at most %d", len(req.GetResourceNames()), h.o.MaxResourceNames)
	}
	req.TypeUrl = t.URL
	// Every poll is a stream of its own: a nonce from an earlier poll
	// would be stale on it (X14), and there is no earlier response on it
	// to reject. X44: the nonce is optional in REST.
	req.ResponseNonce, req.ErrorDetail = "", nil
	return req, 0, ""
}

// poll runs the request through the protocol core and answers with the
// first response that brings the client something new, or 304 once the
// core has nothing new (at once, or after Wait).
func (h *Handler) poll(w http.ResponseWriter, r *http.Request, t *xdstype.Type, req *discoveryv3.DiscoveryRequest) {
	ctx, cancel := context.WithCancel(peer.NewContext(r.Context(), peerOf(r)))
	ps := newPollStream(ctx, req)
	done := make(chan error, 1)
	go func() { done <- h.o.Server.ServeStream(ps, t.URL, false) }()
	ended := false
	defer func() {
		// The core's stream ends with the poll; its goroutines with it.
		cancel()
		if !ended {
			<-done
		}
	}()
	var timeout <-chan time.Time
	if h.o.Wait > 0 {
		timer := time.NewTimer(h.o.Wait)
		defer timer.Stop()
		timeout = timer.C
	}
	processed := ps.processed
	for {
		select {
		case resp := <-ps.sent:
			// The same version is what the client holds: nothing new.
			if resp.GetVersionInfo() != req.GetVersionInfo() {
				h.reply(w, r, resp)
				return
			}
		case <-processed:
			processed = nil
			if timeout == nil {
				notModified(w)
				return
			}
		case <-timeout:
			notModified(w)
			return
		case err := <-done:
			ended = true
			switch {
			case r.Context().Err() != nil:
				// The client is gone: nobody to answer.
			case err == nil:
				// The core saw the poll's request stream end with nothing
				// new to send.
				notModified(w)
			default:
				h.refused(w, r, err)
			}
			return
		case <-r.Context().Done():
			return
		}
	}
}

// reply writes resp in proto3 JSON, with the proto field names Envoy itself
// writes (version_info, type_url; any JSON parser of the proto takes both).
func (h *Handler) reply(w http.ResponseWriter, r *http.Request, resp *discoveryv3.DiscoveryResponse) {
	body, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(resp)
	if err != nil {
		// Never the payload: it may hold keys.
		h.log.Error("REST xDS: encoding a response", "path", r.URL.Path, "type", resp.GetTypeUrl(), "version", resp.GetVersionInfo(), "err", err)
		h.fail(w, r, http.StatusInternalServerError, "the response could not be encoded in JSON")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

func notModified(w http.ResponseWriter) { w.WriteHeader(http.StatusNotModified) }

// refused answers a poll the core ended: its gRPC status becomes the HTTP
// one, with the core's message (written for clients).
func (h *Handler) refused(w http.ResponseWriter, r *http.Request, err error) {
	s := status.Convert(err)
	switch s.Code() {
	case codes.InvalidArgument:
		h.fail(w, r, http.StatusBadRequest, s.Message())
	case codes.Unauthenticated:
		h.fail(w, r, http.StatusUnauthorized, s.Message())
	case codes.PermissionDenied:
		h.fail(w, r, http.StatusForbidden, s.Message())
	case codes.ResourceExhausted, codes.Unavailable:
		// Busy, draining or stopping: Envoy polls again after its
		// refresh_delay, perhaps another replica.
		w.Header().Set("Retry-After", "1")
		h.fail(w, r, http.StatusServiceUnavailable, s.Message())
	default:
		h.log.Warn("REST xDS: a poll ended with an error", "path", r.URL.Path, "err", bounded(err.Error()))
		h.fail(w, r, http.StatusInternalServerError, "the poll ended with an internal error")
	}
}

// fail writes a plain-text error. Bad requests are the client's doing and
// logged at debug level only, so that a client cannot fill the log.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, code int, msg string) {
	h.log.Debug("REST xDS poll refused", "path", bounded(r.URL.Path), "status", code, "reason", msg, "peer", r.RemoteAddr)
	http.Error(w, msg, code)
}

// peerOf is the poll's client as the core knows a gRPC client: its address
// and, over TLS, the connection state, whose verified client certificate
// is the identity groups and secret policies see.
func peerOf(r *http.Request) *peer.Peer {
	p := &peer.Peer{Addr: addr(r.RemoteAddr)}
	if r.TLS != nil {
		p.AuthInfo = credentials.TLSInfo{State: *r.TLS, CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity}}
	}
	return p
}

// addr is a net.Addr for a request's RemoteAddr.
type addr string

func (a addr) Network() string { return "tcp" }
func (a addr) String() string  { return string(a) }

// maxQuoted bounds what of a client's input an error message repeats.
const maxQuoted = 256

func bounded(s string) string {
	if len(s) <= maxQuoted {
		return s
	}
	cut := maxQuoted
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}
