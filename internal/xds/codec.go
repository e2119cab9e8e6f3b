package xds

import (
	"sync"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"github.com/pylon-xds/pylon/internal/snapshot"
)

// ServerOptions are the gRPC server options the xDS server wants: a codec
// that sends a response encoded once for many streams without copying it
// per stream. A server built without them still works, copying.
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.ForceServerCodecV2(sharedCodec{encoding.GetCodecV2("proto")})}
}

// encoded is a response whose bytes are shared by every stream sending the
// same content: the body (version, resources, type) is encoded once; each
// stream adds its own tail (nonce, control plane). Protobuf allows fields
// in any order, so body then tail is the same message. It embeds the
// message so that the stock codec, if installed instead, marshals it as
// usual.
type encoded struct {
	proto.Message
	body []byte
	tail []byte
}

// sharedCodec writes an encoded response's shared bytes as they are, and
// leaves everything else to the proto codec.
type sharedCodec struct{ proto encoding.CodecV2 }

func (c sharedCodec) Marshal(v any) (mem.BufferSlice, error) {
	if e, ok := v.(*encoded); ok {
		return mem.BufferSlice{mem.SliceBuffer(e.body), mem.SliceBuffer(e.tail)}, nil
	}
	return c.proto.Marshal(v)
}

// Unmarshal decodes a DeltaDiscoveryRequest with unmarshalDelta, and
// anything else with the proto codec.
func (c sharedCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if r, ok := v.(*discoveryv3.DeltaDiscoveryRequest); ok {
		buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
		defer buf.Free()
		return unmarshalDelta(buf.ReadOnlyData(), r)
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

// shareable wraps resp for sending: when it holds the whole set at the
// set's version, its body is the shared one and only the tail is encoded
// for this stream.
func (s *Server) shareable(set *snapshot.Set, ttl bool, resp *discoveryv3.DiscoveryResponse) any {
	if resp.VersionInfo != set.Version() || len(resp.Resources) != set.Len() || set.Len() == 0 {
		return resp
	}
	body, err := s.bodies.get(bodyKey{set: set, ttl: ttl}, func() proto.Message {
		return &discoveryv3.DiscoveryResponse{VersionInfo: resp.VersionInfo, Resources: resp.Resources, TypeUrl: resp.TypeUrl}
	})
	if err != nil {
		return resp
	}
	tail, err := proto.Marshal(&discoveryv3.DiscoveryResponse{Nonce: resp.Nonce, ControlPlane: resp.ControlPlane})
	if err != nil {
		return resp
	}
	return &encoded{Message: resp, body: body, tail: tail}
}

// shareableDelta is shareable for delta: a response carrying every resource
// of the set (a first wildcard or all-names response) and removing nothing
// has the same body on every stream of the group.
func (s *Server) shareableDelta(set *snapshot.Set, ttl bool, resp *discoveryv3.DeltaDiscoveryResponse) any {
	if len(resp.RemovedResources) > 0 || len(resp.Resources) != set.Len() || set.Len() == 0 {
		return resp
	}
	body, err := s.bodies.get(bodyKey{set: set, ttl: ttl, delta: true}, func() proto.Message {
		return &discoveryv3.DeltaDiscoveryResponse{SystemVersionInfo: resp.SystemVersionInfo, Resources: resp.Resources, TypeUrl: resp.TypeUrl}
	})
	if err != nil {
		return resp
	}
	tail, err := proto.Marshal(&discoveryv3.DeltaDiscoveryResponse{Nonce: resp.Nonce, ControlPlane: resp.ControlPlane})
	if err != nil {
		return resp
	}
	return &encoded{Message: resp, body: body, tail: tail}
}
