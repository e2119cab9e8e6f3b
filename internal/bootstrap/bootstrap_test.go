package bootstrap

import (
	"encoding/json"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"sigs.k8s.io/yaml"

	// Register the typed extension options so the YAML's Any resolves.
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
)

// The YAML must parse back into Envoy's Bootstrap and pass its validation.
func TestEnvoyBootstrapValidates(t *testing.T) {
	for _, c := range []struct {
		name      string
		opts      Options
		apiType   corev3.ApiConfigSource_ApiType
		static    bool
		xdsHostIs string
	}{
		{"sotw ip", Options{NodeID: "n1", NodeCluster: "c1", XDSAddress: "127.0.0.1:18000"}, corev3.ApiConfigSource_GRPC, true, "127.0.0.1"},
		{"delta dns", Options{NodeID: "n2", XDSAddress: "pylon.internal:18000", Delta: true}, corev3.ApiConfigSource_DELTA_GRPC, false, "pylon.internal"},
	} {
		t.Run(c.name, func(t *testing.T) {
			y, err := EnvoyYAML(c.opts)
			if err != nil {
				t.Fatal(err)
			}
			js, err := yaml.YAMLToJSON(y)
			if err != nil {
				t.Fatal(err)
			}
			var b bootstrapv3.Bootstrap
			if err := protojson.Unmarshal(js, &b); err != nil {
				t.Fatalf("bootstrap does not parse: %v\n%s", err, y)
			}
			if err := b.ValidateAll(); err != nil {
				t.Fatalf("bootstrap invalid: %v", err)
			}
			if b.GetNode().GetId() != c.opts.NodeID || b.GetNode().GetCluster() != c.opts.NodeCluster {
				t.Fatalf("node %v", b.GetNode())
			}
			ads := b.GetDynamicResources().GetAdsConfig()
			if ads.GetApiType() != c.apiType || ads.GetGrpcServices()[0].GetEnvoyGrpc().GetClusterName() != "xds_cluster" {
				t.Fatalf("ads_config %v", ads)
			}
			if b.GetDynamicResources().GetCdsConfig().GetAds() == nil || b.GetDynamicResources().GetLdsConfig().GetAds() == nil {
				t.Fatal("CDS and LDS must come from ADS")
			}
			xc := b.GetStaticResources().GetClusters()[0]
			if xc.GetName() != "xds_cluster" || len(xc.GetTypedExtensionProtocolOptions()) != 1 {
				t.Fatalf("xds cluster %v", xc)
			}
			sa := xc.GetLoadAssignment().GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress()
			if sa.GetAddress() != c.xdsHostIs || sa.GetPortValue() != 18000 {
				t.Fatalf("xds endpoint %v", sa)
			}
			if got := b.GetAdmin().GetAddress().GetSocketAddress().GetAddress(); got != "127.0.0.1" {
				t.Fatalf("admin binds %q, want loopback", got)
			}
		})
	}
}

func TestBootstrapErrors(t *testing.T) {
	if _, err := EnvoyYAML(Options{XDSAddress: "127.0.0.1:1"}); err == nil {
		t.Error("no node id: want an error")
	}
	if _, err := GRPC(Options{NodeID: "n", XDSAddress: "no-port"}); err == nil {
		t.Error("bad address: want an error")
	}
}

func TestGRPCBootstrapShape(t *testing.T) {
	out, err := GRPC(Options{NodeID: "n1", NodeCluster: "c1", XDSAddress: "127.0.0.1:18000"})
	if err != nil {
		t.Fatal(err)
	}
	var b map[string]any
	if err := json.Unmarshal(out, &b); err != nil {
		t.Fatal(err)
	}
	srv := b["xds_servers"].([]any)[0].(map[string]any)
	if srv["server_uri"] != "127.0.0.1:18000" {
		t.Fatalf("server_uri %v", srv["server_uri"])
	}
	if b["node"].(map[string]any)["id"] != "n1" {
		t.Fatalf("node %v", b["node"])
	}
}
