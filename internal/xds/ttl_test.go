package xds_test

import (
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

const rtds = xdstype.RuntimeURL

func nodeWith(id string, features ...string) *corev3.Node {
	n := xdstest.Node(id)
	n.ClientFeatures = features
	return n
}

const (
	featTTL      = "xds.config.supports-resource-ttl"
	featWrap     = "xds.config.supports-resource-in-sotw"
	featWrapDocs = "xds.config.resource-in-sotw"
)

func ttlWorld(ttl time.Duration) []any {
	flag := xdstest.Runtime("flag", "fault.abort", 100)
	if ttl == 0 {
		return with(flag)
	}
	return with(xdstest.TTL{Message: flag, TTL: ttl})
}

func TestTTL(t *testing.T) {
	t.Run("X41_delta_ttl_heartbeat_and_removal", func(t *testing.T) {
		e := setup(t, ttlWorld(200*time.Millisecond)...)
		s := xdstest.OpenDeltaADS(t, e.conn, nodeWith("envoy", featTTL))
		s.Subscribe(rtds, "flag")
		r := s.RecvType(rtds)
		if len(r.Resources) != 1 || r.Resources[0].GetTtl().AsDuration() != 200*time.Millisecond || r.Resources[0].GetResource() == nil {
			t.Fatalf("first response %v", r.Resources)
		}
		version := r.Resources[0].Version
		s.ACK(r)
		// Heartbeats refresh the TTL: name, the same version, the TTL, no
		// payload.
		hb := s.RecvType(rtds)
		if len(hb.Resources) != 1 {
			t.Fatalf("heartbeat holds %d resources", len(hb.Resources))
		}
		if h := hb.Resources[0]; h.Name != "flag" || h.Version != version || h.GetTtl().AsDuration() != 200*time.Millisecond || h.Resource != nil {
			t.Fatalf("heartbeat %v", h)
		}
		s.ACK(hb)
		// Resending without a TTL removes it.
		e.srv.Publish(t, ttlWorld(0)...)
		var plain *discoveryv3.DeltaDiscoveryResponse
		for plain == nil {
			r := s.RecvType(rtds)
			s.ACK(r)
			if len(r.Resources) == 1 && r.Resources[0].Resource != nil {
				plain = r
			}
		}
		if p := plain.Resources[0]; p.Ttl != nil || p.Version == version {
			t.Fatalf("resent without TTL: %v", p)
		}
	})

	t.Run("X42_delta_ttl_only_for_clients_that_support_it", func(t *testing.T) {
		e := setup(t, ttlWorld(time.Hour)...)
		s := xdstest.OpenDeltaADS(t, e.conn, nodeWith("old-client"))
		s.Subscribe(rtds, "flag")
		r := s.RecvType(rtds)
		if len(r.Resources) != 1 || r.Resources[0].Ttl != nil || r.Resources[0].Resource == nil {
			t.Fatalf("client without TTL support got %v", r.Resources)
		}
	})

	t.Run("X42_sotw_wrapped_only_with_both_features", func(t *testing.T) {
		e := setup(t, ttlWorld(200*time.Millisecond)...)
		wrapped := func(features ...string) bool {
			s := xdstest.OpenADS(t, e.conn, nodeWith("n", features...))
			defer s.Close()
			s.Request(rtds, "flag")
			r := s.RecvType(rtds)
			if len(r.Resources) != 1 {
				t.Fatalf("%d resources", len(r.Resources))
			}
			a := r.Resources[0]
			if a.TypeUrl == rtds {
				return false
			}
			var res discoveryv3.Resource
			if err := a.UnmarshalTo(&res); err != nil {
				t.Fatalf("not a Resource: %s", a.TypeUrl)
			}
			if res.GetTtl().AsDuration() != 200*time.Millisecond || res.GetResource().GetTypeUrl() != rtds {
				t.Fatalf("wrapped resource %v", &res)
			}
			return true
		}
		if !wrapped(featTTL, featWrap) || !wrapped(featTTL, featWrapDocs) {
			t.Fatal("a client with both features should get Resource-wrapped TTLs (either spelling)")
		}
		if wrapped(featTTL) || wrapped(featWrap) || wrapped() {
			t.Fatal("TTL wrapping sent to a client that does not advertise both features")
		}
	})

	t.Run("X41_sotw_heartbeat", func(t *testing.T) {
		e := setup(t, ttlWorld(200*time.Millisecond)...)
		s := xdstest.OpenADS(t, e.conn, nodeWith("envoy", featTTL, featWrap))
		s.Request(rtds, "flag")
		first := s.RecvType(rtds)
		s.Request(rtds, "flag")
		hb := s.RecvType(rtds)
		if hb.VersionInfo != first.VersionInfo || hb.Nonce == first.Nonce || len(hb.Resources) != 1 {
			t.Fatalf("heartbeat %v", hb)
		}
		var res discoveryv3.Resource
		if err := hb.Resources[0].UnmarshalTo(&res); err != nil || res.Name != "flag" || res.Resource != nil || res.Ttl == nil {
			t.Fatalf("heartbeat resource %v (%v)", &res, err)
		}
	})
}
