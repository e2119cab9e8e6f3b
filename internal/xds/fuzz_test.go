package xds_test

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/xds"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// The fuzzer's alphabets: type URLs (served, unserved and garbage) and
// resource names (present in one world or the other, absent, wildcard).
var (
	fuzzTypes = []string{cds, eds, lds, rds, sds, xdstype.RuntimeURL, "", "type.googleapis.com/garbage.Thing",
		"type.googleapis.com/envoy.config.cluster.v3.Clusterx", xdstype.ScopedRouteURL, vhds}
	fuzzNames = []string{"c0", "c1", "c2", "l0", "r0", "s0", "s1", "missing", "*", "", xdstest.ProbeName,
		"vr", "vr/api.example.com", "vr/none.example.com", "vr/api"}
)

// fuzzVHDS is the route configuration "vr" with VHDS and its virtual hosts
// (names "vr/..."), sending to cluster.
func fuzzVHDS(cluster string, hosts ...string) []proto.Message {
	rc := xdstest.Route("vr", cluster)
	rc.VirtualHosts[0].Domains = []string{"www.example.com"}
	rc.Vhds = &routev3.Vhds{ConfigSource: xdstest.ADS()}
	out := []proto.Message{rc}
	for _, h := range hosts {
		vh := xdstest.Route("vr/"+h, cluster).VirtualHosts[0]
		vh.Domains = []string{h + ".example.com"}
		if h == "all" {
			vh.Domains = []string{"*"}
		}
		out = append(out, vh)
	}
	return out
}

// fuzzWorlds are the two snapshots the fuzzer switches between: every
// type changes between them, and both hold Secrets that an unverified
// stream must never receive.
func fuzzWorlds(t testing.TB, reg *xdstype.Registry) []*snapshot.Snapshot {
	a := xdstest.Snapshot(t, reg, xdstest.Cluster("c0"), xdstest.Cluster("c1"), xdstest.Endpoints("c0", 1), xdstest.Endpoints("c1", 2),
		xdstest.APIListener("l0", "r0"), xdstest.Route("r0", "c0"), secret("s0"), fuzzVHDS("c0", "api"))
	b := xdstest.Snapshot(t, reg, xdstest.Cluster("c1"), xdstest.Cluster("c2"), xdstest.Endpoints("c1", 3), xdstest.Endpoints("c2", 4),
		xdstest.APIListener("l0", "r0"), xdstest.Route("r0", "c2"), secret("s0-b"), secret("s1"), fuzzVHDS("c2", "api", "all"))
	return []*snapshot.Snapshot{a, b, xdstest.Snapshot(t, reg)}
}

// published is what the server may ever send: per type, the set versions
// and, per name, the encodings and versions of the resources.
type published struct {
	setVersions map[string]map[string]bool
	encodings   map[string]map[string]bool // type -> name + "\x00" + bytes
	// encoded is the version of each encoding: type -> name + "\x00" + bytes.
	encoded  map[string]map[string]string
	versions map[string]map[string]bool // type -> name + "\x00" + version
	total    int
}

func publishedOf(snaps []*snapshot.Snapshot) *published {
	p := &published{setVersions: map[string]map[string]bool{}, encodings: map[string]map[string]bool{}, versions: map[string]map[string]bool{}, encoded: map[string]map[string]string{}}
	add := func(m map[string]map[string]bool, k1, k2 string) {
		if m[k1] == nil {
			m[k1] = map[string]bool{}
		}
		m[k1][k2] = true
	}
	for _, s := range snaps {
		for _, set := range s.Sets() {
			url := set.Type().URL
			add(p.setVersions, url, set.Version())
			for _, n := range set.Names() {
				r := set.Get(n)
				add(p.encodings, url, n+"\x00"+string(r.Any.GetValue()))
				if p.encoded[url] == nil {
					p.encoded[url] = map[string]string{}
				}
				p.encoded[url][n+"\x00"+string(r.Any.GetValue())] = r.Version
				add(p.versions, url, n+"\x00"+r.Version)
				p.total++
			}
		}
	}
	return p
}

// fuzzInput reads the fuzzer's bytes as a script, zero past the end.
type fuzzInput struct {
	data []byte
	pos  int
}

func (in *fuzzInput) next() byte {
	if in.pos >= len(in.data) {
		return 0
	}
	in.pos++
	return in.data[in.pos-1]
}

func (in *fuzzInput) more() bool { return in.pos < len(in.data) }

func (in *fuzzInput) pick(from []string) string { return from[int(in.next())%len(from)] }

func (in *fuzzInput) names() []string {
	n := int(in.next() % 5)
	out := make([]string, 0, n)
	for range n {
		out = append(out, in.pick(fuzzNames))
	}
	return out
}

// fuzzStream is the fuzzer's side of one stream: what it asked for and
// what it was sent, to check the invariants against.
type fuzzStream struct {
	delta bool
	// asked is every name the client named per type, in any request.
	asked map[string]map[string]bool
	// nonces and versions are the latest per type, for plausible ACKs.
	nonces, versions map[string]string
	requests         int
	// reconnect holds, per type, the set versions of the worlds: what a
	// reconnecting client presents (X24).
	reconnect map[string][]string
}

func (fs *fuzzStream) ask(typeURL string, names ...string) {
	if fs.asked[typeURL] == nil {
		fs.asked[typeURL] = map[string]bool{}
	}
	for _, n := range names {
		fs.asked[typeURL][n] = true
	}
}

// sotwRequest decodes one state-of-the-world request.
func (fs *fuzzStream) sotwRequest(in *fuzzInput, first bool) *discoveryv3.DiscoveryRequest {
	req := &discoveryv3.DiscoveryRequest{TypeUrl: in.pick(fuzzTypes), ResourceNames: in.names()}
	flags := in.next()
	if first || flags&1 != 0 {
		req.Node = xdstest.Node(fmt.Sprintf("fuzz-%d", flags>>5))
	}
	switch flags >> 1 & 3 {
	case 1:
		req.ResponseNonce, req.VersionInfo = fs.nonces[req.TypeUrl], fs.versions[req.TypeUrl]
	case 2:
		req.ResponseNonce, req.VersionInfo = "999", "garbage-version"
	case 3:
		// A reconnect: a version of a world's set, no nonce (X24).
		if vs := fs.reconnect[req.TypeUrl]; len(vs) > 0 {
			req.VersionInfo = vs[int(in.next())%len(vs)]
		}
	}
	if flags&8 != 0 {
		req.ErrorDetail = &rpcstatus.Status{Code: 3, Message: strings.Repeat("nack ", int(flags>>4))}
	}
	fs.ask(req.TypeUrl, req.ResourceNames...)
	return req
}

// deltaRequest decodes one delta request.
func (fs *fuzzStream) deltaRequest(in *fuzzInput, first bool) *discoveryv3.DeltaDiscoveryRequest {
	req := &discoveryv3.DeltaDiscoveryRequest{TypeUrl: in.pick(fuzzTypes), ResourceNamesSubscribe: in.names(), ResourceNamesUnsubscribe: in.names()}
	flags := in.next()
	if first || flags&1 != 0 {
		req.Node = xdstest.Node(fmt.Sprintf("fuzz-%d", flags>>5))
	}
	switch flags >> 1 & 3 {
	case 1:
		req.ResponseNonce = fs.nonces[req.TypeUrl]
	case 2:
		req.ResponseNonce = "999"
	case 3:
		req.InitialResourceVersions = map[string]string{in.pick(fuzzNames): "v-" + in.pick(fuzzNames)}
		for n := range req.InitialResourceVersions {
			fs.ask(req.TypeUrl, n)
		}
	}
	if flags&8 != 0 {
		req.ErrorDetail = &rpcstatus.Status{Code: 3, Message: "rejected"}
	}
	fs.ask(req.TypeUrl, req.ResourceNamesSubscribe...)
	return req
}

// checkResponse checks one response against the invariants.
func (fs *fuzzStream) checkResponse(t *testing.T, reg *xdstype.Registry, pub *published, resp proto.Message) {
	t.Helper()
	var typeURL string
	var names []string // sent, then (delta, non-wildcard types) removed
	sent := 0
	switch r := resp.(type) {
	case *discoveryv3.DiscoveryResponse:
		typeURL = r.TypeUrl
		fs.nonces[typeURL], fs.versions[typeURL] = r.Nonce, r.VersionInfo
		if !pub.setVersions[typeURL][r.VersionInfo] && !heldVersionRE.MatchString(r.VersionInfo) {
			t.Fatalf("%s response at version %q, neither a set's version nor a hash of what the client holds", typeURL, r.VersionInfo)
		}
		if typ := reg.Lookup(typeURL); typ != nil && typ.FullState {
			// A full-state response is all the client holds: its version
			// must be the hash of exactly its resources (X24).
			if want := responseVersion(pub, r); r.VersionInfo != want && r.VersionInfo != "partial-"+want {
				t.Fatalf("%s response at version %q, want the hash %q of what it holds", typeURL, r.VersionInfo, want)
			}
		}
		for _, a := range r.Resources {
			m, err := a.UnmarshalNew()
			if err != nil {
				t.Fatalf("%s response holds an undecodable resource: %v", typeURL, err)
			}
			name := xdstype.NameOf(m)
			if !pub.encodings[typeURL][name+"\x00"+string(a.GetValue())] {
				t.Fatalf("%s response holds %q in a form never published", typeURL, name)
			}
			names = append(names, name)
		}
		sent = len(names)
	case *discoveryv3.DeltaDiscoveryResponse:
		typeURL = r.TypeUrl
		fs.nonces[typeURL] = r.Nonce
		for _, res := range r.Resources {
			if typeURL == vhds {
				fs.checkVHDS(t, pub, res)
			} else if !pub.versions[typeURL][res.Name+"\x00"+res.Version] {
				t.Fatalf("%s delta response holds %q at version %q, never published", typeURL, res.Name, res.Version)
			}
			names = append(names, res.Name)
		}
		sent = len(names)
		if t := reg.Lookup(typeURL); t != nil && !t.Wildcard {
			names = append(names, r.RemovedResources...)
		}
	}
	typ := reg.Lookup(typeURL)
	if typ == nil {
		t.Fatalf("response of unknown type %q", typeURL)
	}
	if len(names) > pub.total {
		t.Fatalf("%s response names %d resources; %d were ever published", typeURL, len(names), pub.total)
	}
	if typeURL == sds && sent > 0 {
		t.Fatalf("a Secret (%v) was sent over a connection without a client certificate", names[:sent])
	}
	if typ.Wildcard || fs.asked[typeURL]["*"] {
		// Wildcard types, and any type subscribed to "*" explicitly
		// (the xDS spec allows it), may send whatever exists.
		return
	}
	for _, n := range names {
		if !fs.asked[typeURL][n] && !(typeURL == vhds && fs.askedNamespace(n)) {
			t.Fatalf("%s response names %q, which the stream never subscribed to (asked %v)", typeURL, n, fs.asked[typeURL])
		}
	}
}

// checkVHDS checks one resource of a VHDS response: a virtual host at a
// published version, or an alias answered as not found (no payload, named
// by the alias, at a set's version); every alias one the stream asked for.
func (fs *fuzzStream) checkVHDS(t *testing.T, pub *published, res *discoveryv3.Resource) {
	t.Helper()
	for _, a := range res.Aliases {
		if !fs.asked[vhds][a] {
			t.Fatalf("VHDS resource %q carries alias %q, which the stream never subscribed to", res.Name, a)
		}
	}
	switch {
	case res.Resource != nil:
		if !pub.versions[vhds][res.Name+"\x00"+res.Version] {
			t.Fatalf("VHDS response holds %q at version %q, never published", res.Name, res.Version)
		}
	case !slices.Equal(res.Aliases, []string{res.Name}) || !pub.setVersions[vhds][res.Version]:
		t.Fatalf("VHDS resource %q without payload: aliases %v, version %q; want itself, at a set's version", res.Name, res.Aliases, res.Version)
	}
}

// askedNamespace reports whether the stream asked for a VHDS name in the
// namespace of name (a route configuration's name, or an alias of it): the
// virtual hosts of that namespace may be sent and removed.
func (fs *fuzzStream) askedNamespace(name string) bool {
	rc, _, ok := snapshot.VirtualHostNamespace(name)
	if !ok {
		return false
	}
	for n := range fs.asked[vhds] {
		if n == rc || strings.HasPrefix(n, rc+"/") {
			return true
		}
	}
	return false
}

// heldVersionRE is what a SotW version that is not a set's looks like: a
// hash of what the client holds, "partial-" when make-before-break holds
// something back.
var heldVersionRE = regexp.MustCompile(`^(partial-)?[0-9a-f]{16}$`)

// responseVersion is the version a SotW response holding exactly its
// resources should carry: the hash of their (name, version) pairs in name
// order, each string length-prefixed, as a set's version is computed.
func responseVersion(pub *published, r *discoveryv3.DiscoveryResponse) string {
	pairs := map[string]string{}
	var names []string
	for _, a := range r.Resources {
		m, err := a.UnmarshalNew()
		if err != nil {
			return ""
		}
		n := xdstype.NameOf(m)
		names = append(names, n)
		pairs[n] = pub.encoded[r.TypeUrl][n+"\x00"+string(a.GetValue())]
	}
	slices.Sort(names)
	h := sha256.New()
	for _, n := range names {
		for _, s := range []string{n, pairs[n]} {
			h.Write(binary.LittleEndian.AppendUint64(nil, uint64(len(s))))
			h.Write([]byte(s))
		}
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// FuzzStreamRequests drives a stream of either variant with requests
// decoded from the input (types, names, nonces, versions, NACKs from small
// alphabets, garbage included), publishing a new world between requests
// when the input says so, against a real server on loopback gRPC. It
// checks that the server survives; that responses name only what the
// stream subscribed to (non-wildcard types), carry only published versions
// and content, and never a Secret on a connection without a verified
// client certificate; and that their number is bounded by the requests
// and publishes.
func FuzzStreamRequests(f *testing.F) {
	srv := xdstest.Start(f, xds.Options{MaxResourceNames: 8})
	worlds := fuzzWorlds(f, srv.Registry)
	pub := publishedOf(worlds)
	srv.Publisher.Publish(fleet.NewFleet(worlds[0], time.Now()))
	conn := xdstest.Dial(f, srv.Addr)
	reconnect := map[string][]string{}
	for _, w := range worlds {
		for _, set := range w.Sets() {
			reconnect[set.Type().URL] = append(reconnect[set.Type().URL], set.Version())
		}
	}
	for _, seed := range [][]byte{
		{0, 0, 0, 1, 2, 0},                                    // SotW: CDS wildcard
		{0, 0, 2, 2, 1, 0, 2, 1, 1, 2, 3},                     // SotW: EDS c0 c1, ACK
		{0, 0, 0, 1, 2, 1, 0, 1, 3, 1, 4},                     // SotW: CDS, publish, LDS
		{0, 0, 4, 2, 5, 6, 1, 0, 4, 1, 5},                     // SotW: SDS s0 s1 (withheld)
		{0, 0, 7, 0, 1, 0, 8, 0, 0},                           // SotW: garbage type URLs
		{1, 0, 0, 0, 0, 1, 0, 2, 2, 0, 1},                     // delta: CDS, EDS c0
		{1, 0, 4, 2, 5, 6, 0, 1, 1, 4, 3},                     // delta: SDS (withheld), publish
		{1, 0, 2, 1, 0, 1, 0, 6, 0, 2, 7},                     // delta: initial versions
		{0, 0, 2, 4, 0, 1, 2, 7, 3, 1, 10},                    // SotW: names incl. "*" and missing
		{0, 0, 0, 0, 6, 0, 0, 2, 6, 0},                        // SotW: reconnect at CDS's version (spared), then EDS c0
		{1, 1, 0, 0, 10, 3, 11, 12, 13, 0, 0},                 // delta: world a, VHDS namespace, aliases found and not
		{1, 0, 10, 3, 11, 12, 13, 0, 0, 1, 1, 0, 10, 0, 0, 2}, // delta: VHDS namespace and aliases, publish, ACK
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		in := &fuzzInput{data: data}
		fs := &fuzzStream{delta: in.next()&1 == 1, asked: map[string]map[string]bool{}, nonces: map[string]string{}, versions: map[string]string{}, reconnect: reconnect}
		fuzzOne(t, conn, srv, worlds, pub, fs, in)
	})
}

// fuzzOne runs one input's stream to its end and checks every response.
func fuzzOne(t *testing.T, conn *grpc.ClientConn, srv *xdstest.Server, worlds []*snapshot.Snapshot, pub *published, fs *fuzzStream, in *fuzzInput) {
	ctx, cancel := context.WithTimeout(context.Background(), xdstest.Timeout)
	defer cancel()
	method := xdstest.ADSMethod
	if fs.delta {
		method = "/envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources"
	}
	cs, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, method)
	if err != nil {
		t.Fatal(err)
	}
	// Read concurrently: a client that does not read would be evicted.
	resps := make(chan proto.Message, 1024)
	done := make(chan error, 1)
	go func() {
		defer close(resps)
		for {
			var m proto.Message = &discoveryv3.DiscoveryResponse{}
			if fs.delta {
				m = &discoveryv3.DeltaDiscoveryResponse{}
			}
			if err := cs.RecvMsg(m); err != nil {
				done <- err
				return
			}
			resps <- m
		}
	}()
	const maxOps = 48
	publishes := 0
	for op := 0; in.more() && op < maxOps; op++ {
		if kind := in.next() % 4; kind == 1 {
			srv.Publisher.Publish(fleet.NewFleet(worlds[int(in.next())%len(worlds)], time.Now()))
			publishes++
			continue
		}
		var req proto.Message
		if fs.delta {
			req = fs.deltaRequest(in, fs.requests == 0)
		} else {
			req = fs.sotwRequest(in, fs.requests == 0)
		}
		fs.requests++
		if cs.SendMsg(req) != nil {
			break // the server ended the stream; its reason comes from RecvMsg
		}
	}
	_ = cs.CloseSend()
	// The server answers every request before it sees the end of the
	// client's side, then ends the stream.
	types := len(srv.Registry.Ranked())
	bound := fs.requests*(1+2*types) + (publishes+1)*types
	n := 0
	for resp := range resps {
		n++
		if n > bound {
			t.Fatalf("more than %d responses for %d requests and %d publishes", bound, fs.requests, publishes)
		}
		fs.checkResponse(t, srv.Registry, pub, resp)
	}
	if testing.Verbose() {
		t.Logf("%d requests, %d publishes, %d responses", fs.requests, publishes, n)
	}
	if err := <-done; !errors.Is(err, io.EOF) && ctx.Err() != nil {
		t.Fatalf("the stream did not end within %v: %v", xdstest.Timeout, err)
	}
}
