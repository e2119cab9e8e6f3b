package matrix

import (
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/pylon-xds/pylon/internal/certs/certstest"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// secretNames are the Secrets every client asks for: the restricted one,
// the one the change deleted, the raw one with wrapped base64, and a CA
// every verified node may have.
var secretNames = []string{"restricted", "doomed", "wrapped", "public-ca"}

// silence bounds the wait of a per-type SotW SDS stream that must get
// nothing: a stream of one type cannot be probed for silence in order
// (xdstest's probe is another type), so this one wait is on time.
const silence = time.Second

var registry = xdstype.New()

// client is one node: its id, whether it is a canary (metadata
// canary: "true", the rollout's first stage), and its certificate (nil:
// none).
type client struct {
	id     string
	canary bool
	cert   *tls.Certificate
}

func (c client) node() *corev3.Node {
	n := &corev3.Node{Id: c.id, Cluster: nodeCluster, UserAgentName: "matrix"}
	if c.canary {
		n.Metadata = &structpb.Struct{Fields: map[string]*structpb.Value{"canary": structpb.NewStringValue("true")}}
	}
	return n
}

// tlsConfig trusts the fleet's CA and presents c's certificate, if any.
func (f *fleet) tlsConfig(c client) *tls.Config {
	cfg := &tls.Config{RootCAs: certstest.Pool(f.ca), ServerName: "localhost", MinVersion: tls.VersionTLS12}
	if c.cert != nil {
		cfg.Certificates = []tls.Certificate{*c.cert}
	}
	return cfg
}

func (f *fleet) dial(t *testing.T, r *replica, c client) *grpc.ClientConn {
	t.Helper()
	return xdstest.DialTLS(t, r.xds, f.tlsConfig(c))
}

// A transport fetches the Secrets of secretNames as c on r and returns
// what it was sent.
type transport struct {
	name  string
	fetch func(t *testing.T, f *fleet, r *replica, c client) []*anypb.Any
}

var transports = []transport{
	{"sotw-ads", fetchSotWADS},
	{"sotw-type", fetchSotWType},
	{"delta-ads", func(t *testing.T, f *fleet, r *replica, c client) []*anypb.Any {
		return fetchDelta(t, xdstest.OpenDeltaADS(t, f.dial(t, r, c), c.node()))
	}},
	{"delta-type", func(t *testing.T, f *fleet, r *replica, c client) []*anypb.Any {
		return fetchDelta(t, xdstest.OpenDeltaType(t, f.dial(t, r, c), registry.Lookup(xdstype.SecretURL), c.node()))
	}},
	{"rest", func(t *testing.T, f *fleet, r *replica, c client) []*anypb.Any {
		return poll(t, f, r, c, "secrets", secretNames...)
	}},
}

// fetchSotWADS asks for the Secrets, then for the probe: whatever SDS
// response the server has for the stream comes before the probe's.
func fetchSotWADS(t *testing.T, f *fleet, r *replica, c client) []*anypb.Any {
	s := xdstest.OpenADS(t, f.dial(t, r, c), c.node())
	return sotwUntilProbe(t, s, xdstype.SecretURL, secretNames...)
}

// sotwUntilProbe subscribes s to names of typeURL and then to the probe,
// and returns every resource sent before the probe's answer.
func sotwUntilProbe(t *testing.T, s *xdstest.Stream, typeURL string, names ...string) []*anypb.Any {
	t.Helper()
	s.Request(typeURL, names...)
	s.Request(xdstype.RuntimeURL, xdstest.ProbeName)
	var got []*anypb.Any
	for range 10 {
		resp := s.Recv()
		if resp.TypeUrl == xdstype.RuntimeURL {
			return got
		}
		got = append(got, resp.Resources...)
	}
	t.Fatal("no probe answer in 10 responses")
	return nil
}

func fetchSotWType(t *testing.T, f *fleet, r *replica, c client) []*anypb.Any {
	s := xdstest.OpenType(t, f.dial(t, r, c), registry.Lookup(xdstype.SecretURL), c.node())
	s.Request(xdstype.SecretURL, secretNames...)
	if c.cert != nil {
		return s.RecvType(xdstype.SecretURL).Resources
	}
	resp, err := s.NextWithin(silence)
	if err != nil {
		return nil
	}
	return resp.Resources
}

// fetchDelta subscribes to the Secrets: every name is answered (X29), as
// a resource or as not found.
func fetchDelta(t *testing.T, s *xdstest.DeltaStream) []*anypb.Any {
	t.Helper()
	s.Subscribe(xdstype.SecretURL, secretNames...)
	var got []*anypb.Any
	for _, res := range s.RecvType(xdstype.SecretURL).Resources {
		got = append(got, res.Resource)
	}
	return got
}

// poll polls /v3/discovery:<typ> for names as Envoy's REST subscription
// does: 200 with the resources, or 304 with nothing.
func poll(t *testing.T, f *fleet, r *replica, c client, typ string, names ...string) []*anypb.Any {
	t.Helper()
	tr := &http.Transport{TLSClientConfig: f.tlsConfig(c)}
	defer tr.CloseIdleConnections()
	node, err := protojson.Marshal(c.node())
	if err != nil {
		t.Fatal(err)
	}
	body := `{"node": ` + string(node) + `, "resource_names": ` + js(names) + `}`
	req, err := http.NewRequest("POST", "https://"+r.rest+"/v3/discovery:"+typ, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	cl := &http.Client{Transport: tr, Timeout: bound}
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	switch resp.StatusCode {
	case http.StatusNotModified:
		return nil
	case http.StatusOK:
	default:
		t.Fatalf("REST poll: %d %.300s", resp.StatusCode, b)
	}
	var dr discoveryv3.DiscoveryResponse
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, &dr); err != nil {
		t.Fatalf("REST poll: %v: %.300s", err, b)
	}
	return dr.Resources
}

// received is what resources show of the markers: in their wire bytes
// and their JSON.
func (ms markers) received(t *testing.T, resources []*anypb.Any) []string {
	t.Helper()
	var text strings.Builder
	for _, a := range resources {
		text.WriteString(string(a.Value) + "\n")
		if m, err := a.UnmarshalNew(); err == nil {
			b, _ := protojson.Marshal(m)
			text.Write(b)
		}
	}
	return ms.in(text.String())
}

// jsonNames lists the names of the resources of a JSON dump, for messages.
func jsonNames(resources []*anypb.Any) string {
	var names []string
	for _, a := range resources {
		if m, err := a.UnmarshalNew(); err == nil {
			b, _ := protojson.Marshal(m)
			var v struct{ Name string }
			_ = json.Unmarshal(b, &v)
			names = append(names, v.Name)
		}
	}
	return strings.Join(names, ",")
}
