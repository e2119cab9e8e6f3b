package wire

import (
	"sync"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/pylon-xds/pylon/internal/snapshot"
)

// ServerOptions are the gRPC server options the xDS server wants: a codec
// that sends a response encoded once for many streams without copying it
// per stream. A server built without them still works, copying.
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.ForceServerCodecV2(sharedCodec{encoding.GetCodecV2("proto")})}
}

// Encoded is a response whose bytes are shared by every stream sending the
// same content: the body (version, resources, type) is encoded once; each
// stream adds its own tail (nonce, control plane). Protobuf allows fields
// in any order, so body then tail is the same message. It embeds the
// message so that the stock codec, if installed instead, marshals it as
// usual.
type Encoded struct {
	proto.Message
	body []byte
	tail []byte
}

// Parts are the response's shared body and this stream's own tail: the
// bytes sent, in that order.
func (e *Encoded) Parts() (body, tail []byte) { return e.body, e.tail }

// Size is the response's encoded size.
func (e *Encoded) Size() int { return len(e.body) + len(e.tail) }

// Encoder makes responses shareable between streams (SotW, Delta): it
// keeps the bodies encoded for the current sets, and each stream's tail is
// its nonce and the server's control plane. One per server.
type Encoder struct {
	bodies bodies
	tails  tails
}

// Init readies a zero Encoder, once and before use, for a server whose
// responses carry cp. (Kept in place rather than returned: a server holds
// its encoder, and every response reaches it without a pointer more.) An
// identifier proto cannot encode (not UTF-8) leaves the tails empty: every
// tail is then proto.Marshal's, and its error.
func (s *Encoder) Init(cp *corev3.ControlPlane) {
	s.tails, _ = newTails(cp)
}

// sharedCodec writes an encoded response's shared bytes as they are, and
// leaves everything else to the proto codec.
type sharedCodec struct{ proto encoding.CodecV2 }

func (c sharedCodec) Marshal(v any) (mem.BufferSlice, error) {
	if e, ok := v.(*Encoded); ok {
		return mem.BufferSlice{mem.SliceBuffer(e.body), mem.SliceBuffer(e.tail)}, nil
	}
	return c.proto.Marshal(v)
}

// Unmarshal decodes a DeltaDiscoveryRequest with unmarshalDelta, a
// DiscoveryRequest with unmarshalSotW, and anything else with the proto
// codec.
func (c sharedCodec) Unmarshal(data mem.BufferSlice, v any) error {
	switch r := v.(type) {
	case *discoveryv3.DeltaDiscoveryRequest:
		buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
		defer buf.Free()
		return unmarshalDelta(buf.ReadOnlyData(), r)
	case *discoveryv3.DiscoveryRequest:
		buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
		defer buf.Free()
		return unmarshalSotW(buf.ReadOnlyData(), r)
	}
	return c.proto.Unmarshal(data, v)
}

func (c sharedCodec) Name() string { return "proto" }

// bodies caches, per set and TTL variant, the encoded body of the response
// holding the whole set at its version: what every wildcard CDS or LDS
// stream, and every EDS stream subscribed to every cluster, is sent.
type bodies struct {
	mu sync.Mutex
	m  map[bodyKey][]byte
	// last remembers the sets cached, so the cache holds the current
	// snapshot's and not every snapshot's.
	order []bodyKey
}

type bodyKey struct {
	set   *snapshot.Set
	ttl   bool
	delta bool
}

const maxBodies = 64

// get returns the cached body for k, encoding body() on a miss.
func (b *bodies) get(k bodyKey, body func() proto.Message) ([]byte, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if cached, ok := b.m[k]; ok {
		return cached, nil
	}
	enc, err := proto.MarshalOptions{Deterministic: true}.Marshal(body())
	if err != nil {
		return nil, err
	}
	if b.m == nil {
		b.m = map[bodyKey][]byte{}
	}
	b.m[k] = enc
	b.order = append(b.order, k)
	if len(b.order) > maxBodies {
		delete(b.m, b.order[0])
		b.order = b.order[1:]
	}
	return enc, nil
}

// SotW wraps resp for sending: when it holds the whole set at the set's
// version, its body is the shared one and only the tail is encoded for
// this stream (an *Encoded); otherwise it is resp. A response with
// resource_errors is the stream's own: sent whole.
func (s *Encoder) SotW(set *snapshot.Set, ttl bool, resp *discoveryv3.DiscoveryResponse) any {
	if resp.VersionInfo != set.Version() || len(resp.Resources) != set.Len() || set.Len() == 0 || len(resp.ResourceErrors) > 0 {
		return resp
	}
	body, err := s.bodies.get(bodyKey{set: set, ttl: ttl}, func() proto.Message {
		return &discoveryv3.DiscoveryResponse{VersionInfo: resp.VersionInfo, Resources: resp.Resources, TypeUrl: resp.TypeUrl}
	})
	if err != nil {
		return resp
	}
	tail, err := s.tails.sotw(resp.Nonce, resp.ControlPlane)
	if err != nil {
		return resp
	}
	return &Encoded{Message: resp, body: body, tail: tail}
}

// Delta is SotW for delta: a response carrying every resource of the set
// (a first wildcard or all-names response) and removing nothing has the
// same body on every stream of the group (resource_errors aside).
func (s *Encoder) Delta(set *snapshot.Set, ttl bool, resp *discoveryv3.DeltaDiscoveryResponse) any {
	if len(resp.RemovedResources) > 0 || len(resp.Resources) != set.Len() || set.Len() == 0 || len(resp.ResourceErrors) > 0 {
		return resp
	}
	body, err := s.bodies.get(bodyKey{set: set, ttl: ttl, delta: true}, func() proto.Message {
		return &discoveryv3.DeltaDiscoveryResponse{SystemVersionInfo: resp.SystemVersionInfo, Resources: resp.Resources, TypeUrl: resp.TypeUrl}
	})
	if err != nil {
		return resp
	}
	tail, err := s.tails.delta(resp.Nonce, resp.ControlPlane)
	if err != nil {
		return resp
	}
	return &Encoded{Message: resp, body: body, tail: tail}
}

// nonceField is the nonce's field number in DiscoveryResponse and in
// DeltaDiscoveryResponse alike (TestTailsAsProtoEncodes checks it).
const nonceField protowire.Number = 5

// tails encodes a shared response's own part, its nonce and the server's
// control plane, by hand: proto.Marshal of a message built for it shows in
// the CPU profile of the fleet benchmark's route change (bench/fleet
// -n 5000 -profile). The control plane's field is the same on every
// response and encoded once, by proto (newTails); protobuf's own order
// (nonce, then control plane) is kept, so the bytes are what proto.Marshal
// writes.
type tails struct {
	cp              *corev3.ControlPlane
	sotwCP, deltaCP []byte
}

func newTails(cp *corev3.ControlPlane) (tails, error) {
	s, err := proto.Marshal(&discoveryv3.DiscoveryResponse{ControlPlane: cp})
	if err != nil {
		return tails{}, err
	}
	d, err := proto.Marshal(&discoveryv3.DeltaDiscoveryResponse{ControlPlane: cp})
	if err != nil {
		return tails{}, err
	}
	return tails{cp: cp, sotwCP: s, deltaCP: d}, nil
}

func (t *tails) sotw(nonce string, cp *corev3.ControlPlane) ([]byte, error) {
	if cp != t.cp || t.cp == nil {
		return proto.Marshal(&discoveryv3.DiscoveryResponse{Nonce: nonce, ControlPlane: cp})
	}
	return appendTail(nonce, t.sotwCP), nil
}

func (t *tails) delta(nonce string, cp *corev3.ControlPlane) ([]byte, error) {
	if cp != t.cp || t.cp == nil {
		return proto.Marshal(&discoveryv3.DeltaDiscoveryResponse{Nonce: nonce, ControlPlane: cp})
	}
	return appendTail(nonce, t.deltaCP), nil
}

func appendTail(nonce string, cp []byte) []byte {
	b := make([]byte, 0, 1+protowire.SizeBytes(len(nonce))+len(cp))
	if nonce != "" { // proto3 leaves an empty string out
		b = protowire.AppendTag(b, nonceField, protowire.BytesType)
		b = protowire.AppendString(b, nonce)
	}
	return append(b, cp...)
}
