package csds_test

import (
	"context"
	"crypto/tls"
	"net"
	"strings"
	"testing"
	"time"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	statusv3 "github.com/envoyproxy/go-control-plane/envoy/service/status/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/pylon-xds/pylon/internal/csds"
	"github.com/pylon-xds/pylon/internal/daemon"
	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/xds"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

const (
	readToken  = "read-token-0123456789"
	writeToken = "write-token-0123456789"
	// keyMarker is in the Secret's private key only: it must never come
	// back from CSDS.
	keyMarker = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQDsecretKEYmaterial"
)

var (
	cds = xdstype.ClusterURL
	sds = xdstype.SecretURL
)

// env is a Pylon xDS server with CSDS on the same gRPC server, fed by the
// daemon's real status tracker.
type env struct {
	addr string
	pub  *fleet.Publisher
	reg  *xdstype.Registry
}

// start serves xDS and CSDS on 127.0.0.1:0 (TLS when tlsConfig is set)
// until the test ends.
func start(t *testing.T, authorize func(context.Context) error, tlsConfig *tls.Config, opts csds.Options) *env {
	t.Helper()
	reg, pub := xdstype.New(), fleet.NewPublisher()
	obs := daemon.NewObservability(reg, pub)
	srv := xds.New(xds.Options{Registry: reg, Fleets: pub, Observer: obs.Observer, InsecureServeSecrets: true, Identifier: "pylon-test"})
	opts.Tracker, opts.Registry, opts.Authorize = obs.Tracker, reg, authorize
	gopts := srv.GRPCOptions()
	if tlsConfig != nil {
		gopts = append(gopts, grpc.Creds(credentials.NewTLS(tlsConfig)))
	}
	g := grpc.NewServer(gopts...)
	srv.Register(g)
	csds.New(opts).Register(g)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = g.Serve(srv.Listener(lis))
	}()
	t.Cleanup(func() {
		srv.Shutdown()
		g.Stop()
		<-done
	})
	return &env{addr: lis.Addr().String(), pub: pub, reg: reg}
}

func (e *env) publish(t *testing.T, msgs ...any) {
	t.Helper()
	e.pub.Publish(fleet.NewFleet(xdstest.Snapshot(t, e.reg, msgs...), time.Now()))
}

func secret(name string) *tlsv3.Secret {
	pem := "-----BEGIN PRIVATE KEY-----\n" + keyMarker + "\n-----END PRIVATE KEY-----\n"
	return &tlsv3.Secret{Name: name, Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
		CertificateChain: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"}},
		PrivateKey:       &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: pem}},
	}}}
}

func withToken(ctx context.Context, tok string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tok)
}

func fetch(t *testing.T, conn *grpc.ClientConn, ctx context.Context, req *statusv3.ClientStatusRequest) (*statusv3.ClientStatusResponse, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, xdstest.Timeout)
	defer cancel()
	return statusv3.NewClientStatusDiscoveryServiceClient(conn).FetchClientStatus(ctx, req)
}

// entryOf returns node's entry for (typeURL, name), or nil.
func entryOf(resp *statusv3.ClientStatusResponse, node, typeURL, name string) *statusv3.ClientConfig_GenericXdsConfig {
	for _, cc := range resp.GetConfig() {
		if cc.GetNode().GetId() != node {
			continue
		}
		for _, g := range cc.GetGenericXdsConfigs() {
			if g.GetTypeUrl() == typeURL && g.GetName() == name {
				return g
			}
		}
	}
	return nil
}

// waitFor fetches (with the read token) until ok holds of node's entry for
// (typeURL, name), failing after xdstest.Timeout: the tracker learns of an
// ACK on the server's stream loop, after the client sent it.
func waitFor(t *testing.T, conn *grpc.ClientConn, node, typeURL, name string, ok func(*statusv3.ClientConfig_GenericXdsConfig) bool) (*statusv3.ClientStatusResponse, *statusv3.ClientConfig_GenericXdsConfig) {
	t.Helper()
	deadline := time.Now().Add(xdstest.Timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	var last *statusv3.ClientConfig_GenericXdsConfig
	for time.Now().Before(deadline) {
		resp, err := fetch(t, conn, withToken(context.Background(), readToken), &statusv3.ClientStatusRequest{})
		if err != nil {
			t.Fatalf("FetchClientStatus: %v", err)
		}
		if last = entryOf(resp, node, typeURL, name); last != nil && ok(last) {
			return resp, last
		}
		<-tick.C
	}
	t.Fatalf("node %q %s %q never reached the wanted state; last entry: %v", node, typeURL, name, last)
	return nil, nil
}

func tokens() func(context.Context) error {
	return csds.TokenOrIdentity(fixed(readToken), nil)
}

// TestSyncedACKed: a proxy that ACKs shows SYNCED and ACKED with the exact
// version it was sent, the resource as sent, and its node.
func TestSyncedACKed(t *testing.T) {
	e := start(t, tokens(), nil, csds.Options{})
	e.publish(t, cl("c1"), cl("c2"))
	conn := xdstest.Dial(t, e.addr)
	s := xdstest.OpenADS(t, conn, xdstest.Node("n1"))
	s.Request(cds)
	r := s.RecvType(cds)
	s.ACK(r)

	resp, got := waitFor(t, conn, "n1", cds, "c1", func(g *statusv3.ClientConfig_GenericXdsConfig) bool {
		return g.GetClientStatus() == adminv3.ClientResourceStatus_ACKED
	})
	if got.GetConfigStatus() != statusv3.ConfigStatus_SYNCED || got.GetVersionInfo() != r.GetVersionInfo() || r.GetVersionInfo() == "" {
		t.Fatalf("entry %v, want SYNCED at version %q", got, r.GetVersionInfo())
	}
	var c clusterv3.Cluster
	if err := got.GetXdsConfig().UnmarshalTo(&c); err != nil || !proto.Equal(&c, xdstest.Cluster("c1")) {
		t.Fatalf("xds_config is %v (%v), want the cluster sent", &c, err)
	}
	if entryOf(resp, "n1", cds, "c2") == nil {
		t.Fatal("no entry for c2")
	}
	if got.GetLastUpdated() == nil {
		t.Fatal("no last_updated")
	}
	bare, err := fetch(t, conn, withToken(context.Background(), readToken), &statusv3.ClientStatusRequest{ExcludeResourceContents: true})
	if err != nil {
		t.Fatal(err)
	}
	if e := entryOf(bare, "n1", cds, "c1"); e == nil || e.GetXdsConfig() != nil || e.GetVersionInfo() != r.GetVersionInfo() {
		t.Fatalf("exclude_resource_contents: entry %v, want the status without xds_config", e)
	}
}

// TestStale: a proxy sent a newer version that it has not ACKed
// yet shows STALE, with the version it was sent.
func TestStale(t *testing.T) {
	e := start(t, tokens(), nil, csds.Options{})
	e.publish(t, cl("c1"))
	conn := xdstest.Dial(t, e.addr)
	s := xdstest.OpenADS(t, conn, xdstest.Node("n1"))
	s.Request(cds)
	r1 := s.RecvType(cds)
	s.ACK(r1)
	waitFor(t, conn, "n1", cds, "c1", func(g *statusv3.ClientConfig_GenericXdsConfig) bool {
		return g.GetConfigStatus() == statusv3.ConfigStatus_SYNCED
	})
	e.publish(t, cl("c1"), cl("c3"))
	r2 := s.RecvType(cds)
	// Whatever the moment: sent and not answered is STALE, never SYNCED.
	_, got := waitFor(t, conn, "n1", cds, "c3", func(*statusv3.ClientConfig_GenericXdsConfig) bool { return true })
	if got.GetConfigStatus() != statusv3.ConfigStatus_STALE || got.GetClientStatus() != adminv3.ClientResourceStatus_REQUESTED || got.GetVersionInfo() != r2.GetVersionInfo() {
		t.Fatalf("entry %v, want STALE/REQUESTED at %q", got, r2.GetVersionInfo())
	}
}

// TestNACK: a rejection shows ERROR and NACKED with the proxy's detail and
// the rejected version.
func TestNACK(t *testing.T) {
	e := start(t, tokens(), nil, csds.Options{})
	e.publish(t, cl("c1"))
	conn := xdstest.Dial(t, e.addr)
	s := xdstest.OpenADS(t, conn, xdstest.Node("n1"))
	s.Request(cds)
	r := s.RecvType(cds)
	s.NACK(r, "", "cluster c1: unsupported lb_policy")

	_, got := waitFor(t, conn, "n1", cds, "c1", func(g *statusv3.ClientConfig_GenericXdsConfig) bool {
		return g.GetClientStatus() == adminv3.ClientResourceStatus_NACKED
	})
	es := got.GetErrorState()
	if got.GetConfigStatus() != statusv3.ConfigStatus_ERROR || es.GetDetails() != "cluster c1: unsupported lb_policy" || es.GetVersionInfo() != r.GetVersionInfo() || es.GetLastUpdateAttempt() == nil {
		t.Fatalf("entry %v, want ERROR with the NACK's detail and version %q", got, r.GetVersionInfo())
	}
}

// TestSecretRedacted: a Secret's private key never leaves, neither in
// xds_config nor in a NACK detail that quotes it; the certificate does.
func TestSecretRedacted(t *testing.T) {
	e := start(t, tokens(), nil, csds.Options{})
	e.publish(t, secret("s1"))
	conn := xdstest.Dial(t, e.addr)
	s := xdstest.OpenADS(t, conn, xdstest.Node("n1"))
	s.Request(sds, "s1")
	r := s.RecvType(sds)
	if !strings.Contains(r.String(), keyMarker) {
		t.Fatal("test is broken: the proxy did not get the key")
	}
	s.NACK(r, "", "bad key -----BEGIN PRIVATE KEY-----\n"+keyMarker+"\n-----END PRIVATE KEY-----")
	resp, got := waitFor(t, conn, "n1", sds, "s1", func(g *statusv3.ClientConfig_GenericXdsConfig) bool {
		return g.GetClientStatus() == adminv3.ClientResourceStatus_NACKED
	})
	b, err := proto.Marshal(resp)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), keyMarker) {
		t.Fatal("CSDS answer carries the private key")
	}
	var sec tlsv3.Secret
	if err := got.GetXdsConfig().UnmarshalTo(&sec); err != nil {
		t.Fatal(err)
	}
	if sec.GetTlsCertificate().GetCertificateChain().GetInlineString() == "" {
		t.Fatal("the certificate chain was redacted too: it is public")
	}
}

// TestNodeMatchers: exact, prefix and regex select nodes; none selects
// all; node_metadatas are refused, not ignored.
func TestNodeMatchers(t *testing.T) {
	e := start(t, tokens(), nil, csds.Options{})
	e.publish(t, cl("c1"))
	conn := xdstest.Dial(t, e.addr)
	for _, id := range []string{"edge-1", "edge-2", "mesh-1"} {
		s := xdstest.OpenADS(t, conn, xdstest.Node(id))
		s.Request(cds)
		s.ACK(s.RecvType(cds))
		waitFor(t, conn, id, cds, "c1", func(g *statusv3.ClientConfig_GenericXdsConfig) bool {
			return g.GetClientStatus() == adminv3.ClientResourceStatus_ACKED
		})
	}
	id := func(m *matcherv3.StringMatcher) *matcherv3.NodeMatcher { return &matcherv3.NodeMatcher{NodeId: m} }
	cases := []struct {
		name     string
		matchers []*matcherv3.NodeMatcher
		want     string
	}{
		{"all", nil, "edge-1 edge-2 mesh-1"},
		{"exact", []*matcherv3.NodeMatcher{id(&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "edge-2"}})}, "edge-2"},
		{"prefix", []*matcherv3.NodeMatcher{id(&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: "edge-"}})}, "edge-1 edge-2"},
		{"or", []*matcherv3.NodeMatcher{
			id(&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "mesh-1"}}),
			id(&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "edge-1"}}),
		}, "edge-1 mesh-1"},
		{"regex whole id", []*matcherv3.NodeMatcher{id(&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: "edge-[0-9]"}}})}, "edge-1 edge-2"},
		{"regex partial matches nothing", []*matcherv3.NodeMatcher{id(&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: "edge"}}})}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, err := fetch(t, conn, withToken(context.Background(), readToken), &statusv3.ClientStatusRequest{NodeMatchers: c.matchers})
			if err != nil {
				t.Fatal(err)
			}
			if got := nodes(resp); got != c.want {
				t.Fatalf("nodes %q, want %q", got, c.want)
			}
		})
	}
	_, err := fetch(t, conn, withToken(context.Background(), readToken), &statusv3.ClientStatusRequest{NodeMatchers: []*matcherv3.NodeMatcher{{NodeMetadatas: []*matcherv3.StructMatcher{{Path: []*matcherv3.StructMatcher_PathSegment{{Segment: &matcherv3.StructMatcher_PathSegment_Key{Key: "zone"}}}, Value: &matcherv3.ValueMatcher{MatchPattern: &matcherv3.ValueMatcher_PresentMatch{PresentMatch: true}}}}}}})
	if grpcstatus.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "node_matchers[0]: node_metadatas") {
		t.Fatalf("node_metadatas: got %v, want InvalidArgument naming node_matchers[0]: node_metadatas", err)
	}
}

func nodes(resp *statusv3.ClientStatusResponse) string {
	var ids []string
	for _, cc := range resp.GetConfig() {
		ids = append(ids, cc.GetNode().GetId())
	}
	return strings.Join(ids, " ")
}

// TestMaxNodes: an answer holds at most MaxNodes nodes and says in its
// trailer how many it left out.
func TestMaxNodes(t *testing.T) {
	e := start(t, tokens(), nil, csds.Options{MaxNodes: 2})
	e.publish(t, cl("c1"))
	conn := xdstest.Dial(t, e.addr)
	for _, id := range []string{"n1", "n2", "n3"} {
		s := xdstest.OpenADS(t, conn, xdstest.Node(id))
		s.Request(cds)
		s.ACK(s.RecvType(cds))
	}
	deadline := time.Now().Add(xdstest.Timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		var trailer metadata.MD
		ctx, cancel := context.WithTimeout(withToken(context.Background(), readToken), xdstest.Timeout)
		resp, err := statusv3.NewClientStatusDiscoveryServiceClient(conn).FetchClientStatus(ctx, &statusv3.ClientStatusRequest{}, grpc.Trailer(&trailer))
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.GetConfig()) > 2 {
			t.Fatalf("%d nodes in an answer bounded to 2", len(resp.GetConfig()))
		}
		if got := trailer.Get(csds.OmittedHeader); len(got) == 1 && got[0] == "1" {
			if nodes(resp) != "n1 n2" {
				t.Fatalf("nodes %q, want the first two", nodes(resp))
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("never saw %s: 1 (last: %v, nodes %q)", csds.OmittedHeader, trailer, nodes(resp))
		}
		<-tick.C
	}
}

// TestMaxBytes: an answer stops adding nodes once it holds MaxBytes (the
// first node always goes, or it could never be read) and counts the rest
// in its trailer.
func TestMaxBytes(t *testing.T) {
	e := start(t, tokens(), nil, csds.Options{MaxBytes: 1})
	e.publish(t, cl("c1"))
	conn := xdstest.Dial(t, e.addr)
	for _, id := range []string{"n1", "n2", "n3"} {
		s := xdstest.OpenADS(t, conn, xdstest.Node(id))
		s.Request(cds)
		s.ACK(s.RecvType(cds))
	}
	deadline := time.Now().Add(xdstest.Timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		var trailer metadata.MD
		ctx, cancel := context.WithTimeout(withToken(context.Background(), readToken), xdstest.Timeout)
		resp, err := statusv3.NewClientStatusDiscoveryServiceClient(conn).FetchClientStatus(ctx, &statusv3.ClientStatusRequest{}, grpc.Trailer(&trailer))
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.GetConfig()) > 1 {
			t.Fatalf("%d nodes in an answer bounded to 1 byte", len(resp.GetConfig()))
		}
		if got := trailer.Get(csds.OmittedHeader); len(got) == 1 && got[0] == "2" {
			if nodes(resp) != "n1" {
				t.Fatalf("nodes %q, want n1", nodes(resp))
			}
			// The server records a response once its send returns, which
			// may be after the client has it (and ACKed it): n1's Cluster
			// can show a moment later.
			if entryOf(resp, "n1", cds, "c1") != nil {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("never saw %s: 2 with n1 whole (last: %v, nodes %q)", csds.OmittedHeader, trailer, nodes(resp))
		}
		<-tick.C
	}
}

// TestStream: StreamClientStatus answers each request, authorized once.
func TestStream(t *testing.T) {
	e := start(t, tokens(), nil, csds.Options{})
	e.publish(t, cl("c1"))
	conn := xdstest.Dial(t, e.addr)
	s := xdstest.OpenADS(t, conn, xdstest.Node("n1"))
	s.Request(cds)
	s.ACK(s.RecvType(cds))
	waitFor(t, conn, "n1", cds, "c1", func(g *statusv3.ClientConfig_GenericXdsConfig) bool {
		return g.GetClientStatus() == adminv3.ClientResourceStatus_ACKED
	})
	ctx, cancel := context.WithTimeout(withToken(context.Background(), readToken), xdstest.Timeout)
	defer cancel()
	st, err := statusv3.NewClientStatusDiscoveryServiceClient(conn).StreamClientStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := st.Send(&statusv3.ClientStatusRequest{}); err != nil {
			t.Fatal(err)
		}
		resp, err := st.Recv()
		if err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
		if entryOf(resp, "n1", cds, "c1").GetConfigStatus() != statusv3.ConfigStatus_SYNCED {
			t.Fatalf("answer %d: %v", i, resp)
		}
	}
	if err := st.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err == nil {
		t.Fatal("stream did not end after CloseSend")
	}
}

// cl is an EDS cluster with its endpoints.
func cl(name string) []proto.Message {
	return []proto.Message{xdstest.Cluster(name), xdstest.Endpoints(name, 8080)}
}

// TestClosedStreamGone: a proxy that disconnected is no longer answered
// for (the tracker keeps it for a while, for the status page only).
func TestClosedStreamGone(t *testing.T) {
	e := start(t, tokens(), nil, csds.Options{})
	e.publish(t, cl("c1"))
	conn := xdstest.Dial(t, e.addr)
	s := xdstest.OpenADS(t, conn, xdstest.Node("n1"))
	s.Request(cds)
	s.ACK(s.RecvType(cds))
	waitFor(t, conn, "n1", cds, "c1", func(g *statusv3.ClientConfig_GenericXdsConfig) bool {
		return g.GetClientStatus() == adminv3.ClientResourceStatus_ACKED
	})
	s.Close()
	deadline := time.Now().Add(xdstest.Timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		resp, err := fetch(t, conn, withToken(context.Background(), readToken), &statusv3.ClientStatusRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.GetConfig()) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("closed stream's node still answered for: %v", resp)
		}
		<-tick.C
	}
}

// TestStreamRateLimited: a stream's requests are answered at most
// RequestsPerSecond a second (burst of the same), so a caller cannot make
// the server copy the tracker in a loop.
func TestStreamRateLimited(t *testing.T) {
	e := start(t, tokens(), nil, csds.Options{RequestsPerSecond: 5})
	conn := xdstest.Dial(t, e.addr)
	ctx, cancel := context.WithTimeout(withToken(context.Background(), readToken), xdstest.Timeout)
	defer cancel()
	st, err := statusv3.NewClientStatusDiscoveryServiceClient(conn).StreamClientStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const n = 10 // 5 at once, then 5 at 200 ms each: at least 1 s
	begin := time.Now()
	for range n {
		if err := st.Send(&statusv3.ClientStatusRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		if _, err := st.Recv(); err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
	}
	if took := time.Since(begin); took < 900*time.Millisecond {
		t.Fatalf("%d answers in %v: not rate limited to 5 a second", n, took)
	}
	_ = st.CloseSend()
}
