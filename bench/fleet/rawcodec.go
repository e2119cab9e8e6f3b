package main

import (
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"sync"

	"github.com/pylon-xds/pylon/internal/xdstype"
)

// encodedRequest is a request the simulated proxy encoded itself.
type encodedRequest struct{ b []byte }

// proxyCodec sends an encodedRequest's bytes as they are and leaves
// everything else to the proto codec.
type proxyCodec struct {
	proto encoding.CodecV2
	// bufs are the buffers a response split over several is copied
	// into: reused as they are, where gRPC's pool clears each one it
	// hands out (a tenth of the simulator's CPU).
	bufs *sync.Pool
}

func newProxyCodec() proxyCodec {
	return proxyCodec{proto: encoding.GetCodecV2("proto"), bufs: &sync.Pool{New: func() any { return new([]byte) }}}
}

func (c proxyCodec) Marshal(v any) (mem.BufferSlice, error) {
	if e, ok := v.(*encodedRequest); ok {
		return mem.BufferSlice{mem.SliceBuffer(e.b)}, nil
	}
	return c.proto.Marshal(v)
}

func (c proxyCodec) Unmarshal(data mem.BufferSlice, v any) error {
	var r *rawResponse
	switch v := v.(type) {
	case *rawSotW:
		r = &v.rawResponse
	case *rawDelta:
		r = &v.rawResponse
	default:
		return c.proto.Unmarshal(data, v)
	}
	_, delta := v.(*rawDelta)
	if len(data) == 1 {
		// Most responses arrive in one buffer: read in place, not copied
		// into a fresh, cleared one.
		return r.decode(data[0].ReadOnlyData(), delta)
	}
	buf := c.bufs.Get().(*[]byte)
	defer c.bufs.Put(buf)
	if n := data.Len(); cap(*buf) < n {
		*buf = make([]byte, n)
	} else {
		*buf = (*buf)[:n]
	}
	data.CopyTo(*buf)
	return r.decode(*buf, delta)
}

// rawSotW and rawDelta tell the codec which response a rawResponse is.
type (
	rawSotW  struct{ rawResponse }
	rawDelta struct{ rawResponse }
)

func (c proxyCodec) Name() string { return "proto" }

// encodeDelta encodes r with its initial_resource_versions written by
// hand: 10,000 simulated proxies presenting 2,000 versions each spent most
// of a reconnect's CPU in protobuf-go's reflective map encoding, on the
// cores the server runs on (a real Envoy encodes on its own machine). The
// bytes are what proto.Marshal writes, the map's entries in another order,
// which protobuf allows.
//
// The buffer is sized first and written once: grown by appending, a
// 2,000-version request (120 KB) was copied and cleared about twice over,
// and a 10,000-proxy reconnect spent two thirds of the simulator's CPU
// there (memmove and memclr, 24 of 36 s in the slowest runs, where fresh
// memory was slow to fault in).
func encodeDelta(r *discoveryv3.DeltaDiscoveryRequest) (*encodedRequest, error) {
	versions := r.InitialResourceVersions
	r.InitialResourceVersions = nil
	defer func() { r.InitialResourceVersions = versions }()
	size := proto.Size(r)
	for k, v := range versions {
		n := versionEntrySize(k, v)
		size += protowire.SizeTag(5) + protowire.SizeBytes(n)
	}
	b, err := proto.MarshalOptions{}.MarshalAppend(make([]byte, 0, size), r)
	if err != nil {
		return nil, err
	}
	for k, v := range versions {
		b = protowire.AppendTag(b, 5, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(versionEntrySize(k, v)))
		b = protowire.AppendString(protowire.AppendTag(b, 1, protowire.BytesType), k)
		b = protowire.AppendString(protowire.AppendTag(b, 2, protowire.BytesType), v)
	}
	return &encodedRequest{b}, nil
}

// versionEntrySize is the size of a map entry of initial_resource_versions
// (its key and value fields, not the entry's own tag and length).
func versionEntrySize(k, v string) int {
	return protowire.SizeTag(1) + protowire.SizeBytes(len(k)) + protowire.SizeTag(2) + protowire.SizeBytes(len(v))
}

// rawResponse is a response as a simulated proxy reads it: the fields it
// acts on, read off the wire with protowire, and of the resources only
// the assignments' bodies the churn tracker reads (onEDS). Decoding every
// Cluster and assignment with protobuf-go took the simulator more CPU
// than the server spent sending them (a delta fleet's first config: 2.0 s
// against 0.9), on the same two cores; a real Envoy decodes on its own
// machine.
type rawResponse struct {
	size                    int // bytes on the wire
	typeURL, nonce, version string
	resources               int
	// delta: each resource's name and version, and the names removed.
	names, versions, removed []string
	// intern, when set, makes the delta names and versions strings.
	intern func([]byte) string
	// onEDS, when set, is given each ClusterLoadAssignment's encoding as
	// it is read (valid only during the call).
	onEDS func([]byte)
}

// decode reads b as a DiscoveryResponse or, with delta, a
// DeltaDiscoveryResponse.
func (r *rawResponse) decode(b []byte, delta bool) error {
	*r = rawResponse{size: len(b), names: r.names[:0], versions: r.versions[:0], removed: r.removed[:0], intern: r.intern, onEDS: r.onEDS}
	return eachField(b, func(num protowire.Number, v []byte) error {
		switch {
		case num == 1:
			r.version = string(v)
		case num == 2:
			r.resources++
			if delta {
				return r.deltaResource(v)
			}
			return r.any(v)
		case num == 4:
			r.typeURL = string(v)
		case num == 5:
			r.nonce = string(v)
		case num == 6 && delta:
			r.removed = append(r.removed, string(v))
		}
		return nil
	})
}

// deltaResource reads a delta Resource's name (3) and version (1).
func (r *rawResponse) deltaResource(b []byte) error {
	str := r.intern
	if str == nil {
		str = func(b []byte) string { return string(b) }
	}
	var name, version string
	err := eachField(b, func(num protowire.Number, v []byte) error {
		switch num {
		case 1:
			version = str(v)
		case 2:
			return r.any(v)
		case 3:
			name = str(v)
		}
		return nil
	})
	r.names, r.versions = append(r.names, name), append(r.versions, version)
	return err
}

// any hands an Any's value to onEDS when it is a ClusterLoadAssignment.
func (r *rawResponse) any(b []byte) error {
	if r.onEDS == nil {
		return nil
	}
	var typeURL, value []byte
	if err := eachField(b, func(num protowire.Number, v []byte) error {
		switch num {
		case 1:
			typeURL = v
		case 2:
			value = v
		}
		return nil
	}); err != nil {
		return err
	}
	if string(typeURL) == xdstype.EndpointURL {
		r.onEDS(value)
	}
	return nil
}

// eachField calls f with each length-delimited field of message b,
// skipping the others.
func eachField(b []byte, f func(protowire.Number, []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if typ != protowire.BytesType {
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return protowire.ParseError(n)
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		if err := f(num, v); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

// readAssignment reads a ClusterLoadAssignment's cluster name and hands
// each endpoint's socket address (endpoints, lb_endpoints, endpoint,
// address, socket_address, address) to addr.
func readAssignment(b []byte, addr func([]byte)) (cluster string, err error) {
	err = eachField(b, func(num protowire.Number, v []byte) error {
		switch num {
		case 1:
			cluster = string(v)
		case 2:
			return descend(v, []protowire.Number{2, 1, 1, 1, 2}, addr)
		}
		return nil
	})
	return cluster, err
}

// descend hands f every field found down path (a field number a level).
func descend(b []byte, path []protowire.Number, f func([]byte)) error {
	return eachField(b, func(num protowire.Number, v []byte) error {
		switch {
		case num != path[0]:
		case len(path) == 1:
			f(v)
		default:
			return descend(v, path[1:], f)
		}
		return nil
	})
}
