package xdsrest_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/pylon-xds/pylon/internal/status"
	"github.com/pylon-xds/pylon/internal/xds"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdsrest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorder keeps the xDS server's events for tests to wait on.
type recorder struct {
	mu     sync.Mutex
	events []status.Event
	wake   chan struct{}
}

func newRecorder() *recorder { return &recorder{wake: make(chan struct{}, 1)} }

func (r *recorder) Observe(e *status.Event) {
	r.mu.Lock()
	r.events = append(r.events, *e)
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// waitNth returns the nth event matching ok, failing after a bound.
func (r *recorder) waitNth(t *testing.T, n int, ok func(status.Event) bool) status.Event {
	t.Helper()
	deadline := time.After(xdstest.Timeout)
	for {
		r.mu.Lock()
		seen := 0
		for _, e := range r.events {
			if ok(e) {
				if seen++; seen == n {
					r.mu.Unlock()
					return e
				}
			}
		}
		r.mu.Unlock()
		select {
		case <-r.wake:
		case <-deadline:
			r.mu.Lock()
			var seen []string
			for _, e := range r.events {
				seen = append(seen, fmt.Sprintf("%d:%s:%s:%s", e.Kind, e.NodeID(), e.TypeURL, e.Version))
			}
			r.mu.Unlock()
			t.Fatalf("no matching event within %v; events: %v", xdstest.Timeout, seen)
		}
	}
}

// answered matches what the core does with a poll for typeURL at version:
// send that version again, or spare the client the resend (X24).
func answered(typeURL, version string) func(status.Event) bool {
	return func(e status.Event) bool {
		return (e.Kind == status.ResponseSent || e.Kind == status.ResponseSpared) && e.TypeURL == typeURL && e.Version == version
	}
}

// rest is an xDS server with the REST handler in front of it on loopback.
type rest struct {
	xds  *xdstest.Server
	http *httptest.Server
	h    *xdsrest.Handler
	rec  *recorder
}

// start serves REST over plaintext (tlsCfg nil) or TLS on 127.0.0.1.
func start(t *testing.T, xo xds.Options, ro xdsrest.Options, tlsCfg *tls.Config) *rest {
	t.Helper()
	rec := newRecorder()
	xo.Observer = rec
	srv := xdstest.Start(t, xo)
	ro.Server, ro.Registry = srv.XDS, srv.Registry
	h := xdsrest.New(ro)
	hs := httptest.NewUnstartedServer(h)
	if tlsCfg != nil {
		hs.TLS = tlsCfg
		hs.StartTLS()
	} else {
		hs.Start()
	}
	// Registered after xdstest's cleanup, so it runs first: polls end
	// before the xDS server stops.
	t.Cleanup(hs.Close)
	return &rest{xds: srv, http: hs, h: h, rec: rec}
}

// poller polls one type as Envoy's REST subscription does
// (http_subscription_impl.cc): POST the JSON of a DiscoveryRequest with
// the node, type_url, sorted resource_names and the version_info it last
// accepted, never a nonce; 200 is an update whose version it keeps, 304
// no change.
type poller struct {
	t      *testing.T
	url    string
	client *http.Client
	req    *discoveryv3.DiscoveryRequest
}

func (r *rest) poller(t *testing.T, path string, node *corev3.Node, typeURL string, names ...string) *poller {
	return &poller{t: t, url: r.http.URL + path, client: r.http.Client(),
		req: &discoveryv3.DiscoveryRequest{Node: node, TypeUrl: typeURL, ResourceNames: names}}
}

// withClient polls with another HTTP client (a TLS one).
func (p *poller) withClient(c *http.Client) *poller { p.client = c; return p }

// reply is one poll's answer: the status, the raw body, and the response
// when 200.
type reply struct {
	code int
	body []byte
	resp *discoveryv3.DiscoveryResponse
}

// poll sends one poll and, on 200, takes its version as Envoy does.
func (p *poller) poll() reply {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), xdstest.Timeout)
	defer cancel()
	return p.pollCtx(ctx)
}

func (p *poller) pollCtx(ctx context.Context) reply {
	p.t.Helper()
	// Envoy writes proto field names (MessageUtil::getJsonStringFromMessage).
	body, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(p.req)
	if err != nil {
		p.t.Fatal(err)
	}
	rep := post(p.t, ctx, p.client, p.url, "application/json", body)
	if rep.code == http.StatusOK {
		// Envoy's parse is strict (MessageUtil::loadFromJson with its
		// validation visitor): no unknown field.
		rep.resp = &discoveryv3.DiscoveryResponse{}
		if err := protojson.Unmarshal(rep.body, rep.resp); err != nil {
			p.t.Fatalf("200 with a body that is not a DiscoveryResponse: %v\n%s", err, rep.body)
		}
		p.req.VersionInfo = rep.resp.GetVersionInfo()
	}
	return rep
}

func post(t *testing.T, ctx context.Context, c *http.Client, url, contentType string, body []byte) reply {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	resp, err := c.Do(req)
	if err != nil {
		return reply{code: -1, body: []byte(err.Error())}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return reply{code: resp.StatusCode, body: b}
}

func (r reply) String() string { return fmt.Sprintf("%d %s", r.code, bytes.TrimSpace(r.body)) }

// want fails unless the reply has the status code.
func (r reply) want(t *testing.T, code int) reply {
	t.Helper()
	if r.code != code {
		t.Fatalf("got %s, want %d", r, code)
	}
	return r
}

// names returns the resource names of a 200 reply.
func (r reply) names(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, a := range r.resp.GetResources() {
		m, err := a.UnmarshalNew()
		if err != nil {
			t.Fatal(err)
		}
		n, ok := m.(interface{ GetName() string })
		if !ok {
			c, ok := m.(interface{ GetClusterName() string })
			if !ok {
				t.Fatalf("%T has no name", m)
			}
			out = append(out, c.GetClusterName())
			continue
		}
		out = append(out, n.GetName())
	}
	return out
}

// fields returns the top-level JSON object of a reply's body.
func (r reply) fields(t *testing.T) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("body is not a JSON object: %v\n%s", err, r.body)
	}
	return m
}
