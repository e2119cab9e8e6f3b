package xdsrest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/nodegroup"
	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/status"
	"github.com/pylon-xds/pylon/internal/xds"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdsrest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

const (
	cdsPath = "/v3/discovery:clusters"
	edsPath = "/v3/discovery:endpoints"
	sdsPath = "/v3/discovery:secrets"
)

// cluster is a cluster with its assignment.
func cluster(name string) []proto.Message {
	return []proto.Message{xdstest.Cluster(name), xdstest.Endpoints(name, 1)}
}

// The paths are Envoy's: those of the services' google.api.http options,
// one per state-of-the-world type (VHDS is delta only, so not REST).
func TestX44_Paths(t *testing.T) {
	h := xdsrest.New(xdsrest.Options{})
	want := []string{
		cdsPath, edsPath, "/v3/discovery:extension_configs", "/v3/discovery:listeners",
		"/v3/discovery:routes", "/v3/discovery:runtime", "/v3/discovery:scoped-routes", sdsPath,
	}
	if got := h.Paths(); !slices.Equal(got, want) {
		t.Fatalf("paths %v\nwant %v", got, want)
	}
}

// A client polling as Envoy does gets the clusters in proto3 JSON with the
// fields Envoy reads, then 304 while nothing changes, then the change.
func TestX44_PollLikeEnvoy(t *testing.T) {
	r := start(t, xds.Options{}, xdsrest.Options{}, nil)
	first := r.xds.Publish(t, cluster("web"))
	p := r.poller(t, cdsPath, xdstest.Node("proxy-1"), xdstype.ClusterURL)

	rep := p.poll().want(t, http.StatusOK)
	f := rep.fields(t)
	var version, typeURL string
	var resources []map[string]json.RawMessage
	if err := json.Unmarshal(f["version_info"], &version); err != nil {
		t.Fatalf("version_info: %v\n%s", err, rep.body)
	}
	if err := json.Unmarshal(f["type_url"], &typeURL); err != nil {
		t.Fatalf("type_url: %v\n%s", err, rep.body)
	}
	if err := json.Unmarshal(f["resources"], &resources); err != nil {
		t.Fatalf("resources: %v\n%s", err, rep.body)
	}
	if want := first.Set(xdstype.ClusterURL).Version(); version != want || typeURL != xdstype.ClusterURL {
		t.Fatalf("version_info %q type_url %q, want %q and %q", version, typeURL, want, xdstype.ClusterURL)
	}
	if len(resources) != 1 || string(resources[0]["@type"]) != `"`+xdstype.ClusterURL+`"` || string(resources[0]["name"]) != `"web"` {
		t.Fatalf("resources %s", f["resources"])
	}
	if rep.resp.GetControlPlane().GetIdentifier() != "pylon-test" {
		t.Fatalf("control_plane %v (X9)", rep.resp.GetControlPlane())
	}

	// Nothing new: 304 Not Modified, at once (Wait 0), no body.
	if rep := p.poll().want(t, http.StatusNotModified); len(rep.body) != 0 {
		t.Fatalf("304 with a body: %q", rep.body)
	}

	second := r.xds.Publish(t, cluster("web"), cluster("api"))
	rep = p.poll().want(t, http.StatusOK)
	if got := rep.names(t); !slices.Equal(got, []string{"api", "web"}) || rep.resp.GetVersionInfo() != second.Set(xdstype.ClusterURL).Version() {
		t.Fatalf("after the change: %v at %q", got, rep.resp.GetVersionInfo())
	}
	p.poll().want(t, http.StatusNotModified)
}

// A per-resource type answers the names asked for, and 304 when the client
// holds their version although the core answers such a request anew.
func TestX44_NamedEndpoints(t *testing.T) {
	r := start(t, xds.Options{}, xdsrest.Options{}, nil)
	r.xds.Publish(t, xdstest.Cluster("a"), xdstest.Endpoints("a", 1), xdstest.Cluster("b"), xdstest.Endpoints("b", 2))
	p := r.poller(t, edsPath, xdstest.Node("proxy-1"), "", "b")
	rep := p.poll().want(t, http.StatusOK)
	if got := rep.names(t); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("names %v, want [b]", got)
	}
	p.poll().want(t, http.StatusNotModified)
}

// A long poll whose client holds the current version waits, and returns
// the change as soon as it is published.
func TestX44_LongPollReturnsOnChange(t *testing.T) {
	r := start(t, xds.Options{}, xdsrest.Options{Wait: time.Minute}, nil)
	r.xds.Publish(t, cluster("web"))
	p := r.poller(t, cdsPath, xdstest.Node("proxy-1"), xdstype.ClusterURL)
	p.poll().want(t, http.StatusOK)
	held := p.req.GetVersionInfo()

	got := make(chan reply, 1)
	go func() { got <- p.poll() }()
	// The poll is parked once the core has answered it with what the
	// client holds (its second answer at that version).
	r.rec.waitNth(t, 2, answered(xdstype.ClusterURL, held))
	select {
	case rep := <-got:
		t.Fatalf("the long poll answered before any change: %s", rep)
	default:
	}
	r.xds.Publish(t, cluster("web"), cluster("api"))
	select {
	case rep := <-got:
		rep.want(t, http.StatusOK)
		if names := rep.names(t); !slices.Equal(names, []string{"api", "web"}) || rep.resp.GetVersionInfo() == held {
			t.Fatalf("long poll answered %v at %q", names, rep.resp.GetVersionInfo())
		}
	case <-time.After(xdstest.Timeout):
		t.Fatal("the long poll did not return the change")
	}
}

// A long poll with nothing new ends with 304 after Wait.
func TestX44_LongPollTimesOut(t *testing.T) {
	const wait = 300 * time.Millisecond
	r := start(t, xds.Options{}, xdsrest.Options{Wait: wait}, nil)
	r.xds.Publish(t, cluster("web"))
	p := r.poller(t, cdsPath, xdstest.Node("proxy-1"), xdstype.ClusterURL)
	p.poll().want(t, http.StatusOK)
	began := time.Now()
	p.poll().want(t, http.StatusNotModified)
	if took := time.Since(began); took < wait {
		t.Fatalf("304 after %v, want after the %v wait", took, wait)
	}
}

// Node groups apply as on gRPC: each node gets its group's clusters.
func TestX44_NodeGroups(t *testing.T) {
	r := start(t, xds.Options{}, xdsrest.Options{}, nil)
	rules := nodegroup.Groups{
		{Name: "edge", Match: nodegroup.Match{ID: "edge-*"}},
		{Name: "default", Default: true},
	}
	edge := xdstest.Snapshot(t, r.xds.Registry, cluster("edge-web"))
	other := xdstest.Snapshot(t, r.xds.Registry, cluster("web"))
	r.xds.Publisher.Publish(fleet.NewGroupedFleet(rules, []*snapshot.Snapshot{edge, other}))
	for node, want := range map[string]string{"edge-1": "edge-web", "core-1": "web"} {
		rep := r.poller(t, cdsPath, xdstest.Node(node), "").poll().want(t, http.StatusOK)
		if got := rep.names(t); !slices.Equal(got, []string{want}) {
			t.Fatalf("node %s got %v, want [%s]", node, got, want)
		}
	}
}

// Bad requests get a clear 4xx naming what is wrong, before the core.
func TestX44_BadRequests(t *testing.T) {
	r := start(t, xds.Options{}, xdsrest.Options{MaxBody: 4096, MaxResourceNames: 3}, nil)
	r.xds.Publish(t, cluster("web"))
	ctx, cancel := context.WithTimeout(context.Background(), xdstest.Timeout)
	defer cancel()
	c := r.http.Client()
	url := r.http.URL + cdsPath
	node := `"node":{"id":"proxy-1"}`
	for _, tc := range []struct {
		name, path, contentType, body string
		code                          int
		want                          string
	}{
		{"unknown path", "/v3/discovery:nope", "application/json", "{}", http.StatusNotFound, "the endpoints are /v3/discovery:clusters"},
		{"vhds has no REST", "/v3/discovery:vhds", "application/json", "{}", http.StatusNotFound, "no REST xDS endpoint"},
		{"not JSON content", cdsPath, "text/plain", "{" + node + "}", http.StatusUnsupportedMediaType, "Content-Type: application/json"},
		{"bad JSON", cdsPath, "application/json", "{" + node, http.StatusBadRequest, "not a DiscoveryRequest in proto3 JSON"},
		{"no node", cdsPath, "application/json", `{"version_info":"1"}`, http.StatusBadRequest, "has no node"},
		{"other type", cdsPath, "application/json", "{" + node + `,"type_url":"` + xdstype.ListenerURL + `"}`, http.StatusBadRequest, "does not match /v3/discovery:clusters"},
		{"too many names", cdsPath, "application/json", "{" + node + `,"resource_names":["a","b","c","d"]}`, http.StatusBadRequest, "resource_names has 4 names; Pylon accepts at most 3"},
		{"oversized body", cdsPath, "application/json", "{" + node + `,"version_info":"` + strings.Repeat("x", 5000) + `"}`, http.StatusRequestEntityTooLarge, "over 4096 bytes"},
		{"node too long (the core's check)", cdsPath, "application/json", `{"node":{"id":"` + strings.Repeat("n", 2000) + `"}}`, http.StatusBadRequest, "node.id is 2000 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := r.http.URL + tc.path
			rep := post(t, ctx, c, path, tc.contentType, []byte(tc.body)).want(t, tc.code)
			if !strings.Contains(string(rep.body), tc.want) {
				t.Fatalf("body %q, want it to say %q", rep.body, tc.want)
			}
		})
	}
	// A GET is not a poll.
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != http.MethodPost {
		t.Fatalf("GET: %d, Allow %q", resp.StatusCode, resp.Header.Get("Allow"))
	}
}

// Polls beyond MaxPolls get 503 with Retry-After; a parked poll ends when
// its client goes away, and the slot is free again.
func TestX44_TooManyPolls(t *testing.T) {
	r := start(t, xds.Options{}, xdsrest.Options{Wait: time.Minute, MaxPolls: 1}, nil)
	r.xds.Publish(t, cluster("web"))
	p := r.poller(t, cdsPath, xdstest.Node("proxy-1"), xdstype.ClusterURL)
	p.poll().want(t, http.StatusOK)
	held := p.req.GetVersionInfo()

	ctx, cancel := context.WithCancel(context.Background())
	parked := make(chan reply, 1)
	go func() { parked <- p.pollCtx(ctx) }()
	r.rec.waitNth(t, 2, answered(xdstype.ClusterURL, held))

	other := r.poller(t, cdsPath, xdstest.Node("proxy-2"), xdstype.ClusterURL)
	rep := other.poll().want(t, http.StatusServiceUnavailable)
	if !strings.Contains(string(rep.body), "more than 1 polls at once") {
		t.Fatalf("503 body %q", rep.body)
	}
	cancel()
	<-parked
	// The parked poll's stream ended with it (reported closed), and its
	// slot is free.
	r.rec.waitNth(t, 2, func(e status.Event) bool {
		return e.Kind == status.StreamClosed && e.NodeID() == "proxy-1" && e.Reason == xds.ClosedByClient
	})
	deadline := time.Now().Add(xdstest.Timeout)
	for other.poll().code != http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatal("the freed slot was never given to another poll")
		}
	}
}

// A server shutting down ends parked polls with 503: Envoy polls again,
// another replica perhaps.
func TestX44_ShutdownEndsPolls(t *testing.T) {
	r := start(t, xds.Options{}, xdsrest.Options{Wait: time.Minute}, nil)
	r.xds.Publish(t, cluster("web"))
	p := r.poller(t, cdsPath, xdstest.Node("proxy-1"), xdstype.ClusterURL)
	p.poll().want(t, http.StatusOK)
	held := p.req.GetVersionInfo()
	got := make(chan reply, 1)
	go func() { got <- p.poll() }()
	r.rec.waitNth(t, 2, answered(xdstype.ClusterURL, held))
	r.xds.XDS.Shutdown()
	select {
	case rep := <-got:
		rep.want(t, http.StatusServiceUnavailable)
	case <-time.After(xdstest.Timeout):
		t.Fatal("shutdown did not end the parked poll")
	}
}

// slowBody starts a poll that sends its headers and the first byte of its
// body, and no more; the connection is closed when the test ends.
func slowBody(t *testing.T, r *rest) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", r.http.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{", cdsPath); err != nil {
		t.Fatal(err)
	}
	return conn
}

// A client that sends its headers and then trickles its body holds no poll
// slot: a real poll is served meanwhile with a single slot, and the slow
// body is cut off (its connection closed) within the body timeout.
func TestX44_SlowBodyHoldsNoSlot(t *testing.T) {
	r := start(t, xds.Options{}, xdsrest.Options{MaxPolls: 1}, nil)
	r.xds.Publish(t, cluster("web"))
	conn := slowBody(t, r)
	p := r.poller(t, cdsPath, xdstest.Node("proxy-1"), xdstype.ClusterURL)
	if names := p.poll().want(t, http.StatusOK).names(t); len(names) != 1 {
		t.Fatalf("the poll beside a slow body got %v", names)
	}
	// The slow client is answered (400: its body never came) and its
	// connection ends, within the body timeout and a margin.
	_ = conn.SetReadDeadline(time.Now().Add(xdstest.Timeout))
	answer, err := io.ReadAll(conn)
	if err != nil {
		t.Fatalf("the slow body's connection was not ended: %v", err)
	}
	if !bytes.HasPrefix(answer, []byte("HTTP/1.1 400")) {
		t.Fatalf("the slow body was answered %q", answer)
	}
}

// Bodies are read a bounded number at a time (MaxPolls and 16 more, each
// at most MaxBody): past that, a poll is answered 503 before its body is
// read, so clients trickling bodies cannot make Pylon hold any number of
// them.
func TestX44_BodiesReadAtOnceBounded(t *testing.T) {
	r := start(t, xds.Options{}, xdsrest.Options{MaxPolls: 1}, nil)
	r.xds.Publish(t, cluster("web"))
	for range 1 + 16 {
		slowBody(t, r)
	}
	p := r.poller(t, cdsPath, xdstest.Node("proxy-1"), xdstype.ClusterURL)
	deadline := time.Now().Add(xdstest.Timeout)
	// Each slow body is cut off 2 s after its read starts: on a loaded
	// machine the first may end before the last is read, so a poll that
	// got through is followed by one more slow body (at most 64 in all);
	// the message names the bound, 17, whatever the count.
	for opened := 17; ; {
		rep := p.poll()
		if rep.code == http.StatusServiceUnavailable && strings.Contains(string(rep.body), "more than 17 requests being read at once") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("with 17 bodies being read, a poll got %d %s, want 503", rep.code, rep.body)
		}
		if opened < 64 {
			slowBody(t, r)
			opened++
		}
	}
}
