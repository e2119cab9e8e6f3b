package main

import (
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// encodedRequest is a request the simulated proxy encoded itself.
type encodedRequest struct{ b []byte }

// proxyCodec sends an encodedRequest's bytes as they are and leaves
// everything else to the proto codec.
type proxyCodec struct{ proto encoding.CodecV2 }

func (c proxyCodec) Marshal(v any) (mem.BufferSlice, error) {
	if e, ok := v.(*encodedRequest); ok {
		return mem.BufferSlice{mem.SliceBuffer(e.b)}, nil
	}
	return c.proto.Marshal(v)
}

func (c proxyCodec) Unmarshal(data mem.BufferSlice, v any) error { return c.proto.Unmarshal(data, v) }

func (c proxyCodec) Name() string { return "proto" }

// encodeDelta encodes r with its initial_resource_versions written by
// hand: 10,000 simulated proxies presenting 2,000 versions each spent most
// of a reconnect's CPU in protobuf-go's reflective map encoding, on the
// cores the server runs on (a real Envoy encodes on its own machine). The
// bytes are what proto.Marshal writes, the map's entries in another order,
// which protobuf allows.
func encodeDelta(r *discoveryv3.DeltaDiscoveryRequest) (*encodedRequest, error) {
	versions := r.InitialResourceVersions
	r.InitialResourceVersions = nil
	b, err := proto.Marshal(r)
	r.InitialResourceVersions = versions
	if err != nil {
		return nil, err
	}
	for k, v := range versions {
		n := protowire.SizeTag(1) + protowire.SizeBytes(len(k)) + protowire.SizeTag(2) + protowire.SizeBytes(len(v))
		b = protowire.AppendTag(b, 5, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(n))
		b = protowire.AppendString(protowire.AppendTag(b, 1, protowire.BytesType), k)
		b = protowire.AppendString(protowire.AppendTag(b, 2, protowire.BytesType), v)
	}
	return &encodedRequest{b}, nil
}
