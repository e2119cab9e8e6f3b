package integration

import (
	"context"
	"strings"
	"testing"

	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	statusv3 "github.com/envoyproxy/go-control-plane/envoy/service/status/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// serve answers CSDS on the xDS port (issue 13 item 12): with the admin
// read token, each proxy's status per resource, its Secret redacted;
// without a token, nothing.
func TestCSDSOnTheXDSPort(t *testing.T) {
	p, _ := statusPylon(t)
	conn := xdstest.Dial(t, p.xdsAddr)
	s := xdstest.OpenADS(t, conn, xdstest.Node("edge-tls"))
	s.Request(cds)
	s.ACK(s.RecvType(cds))
	s.Request(xdstype.SecretURL, "edge-cert")
	s.ACK(s.RecvType(xdstype.SecretURL), "edge-cert")
	p.state(t, "edge-tls", "SDS", "SYNCED")

	client := statusv3.NewClientStatusDiscoveryServiceClient(conn)
	req := &statusv3.ClientStatusRequest{NodeMatchers: []*matcherv3.NodeMatcher{{
		NodeId: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "edge-tls"}},
	}}}
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	if _, err := client.FetchClientStatus(ctx, req); grpcstatus.Code(err) != codes.Unauthenticated {
		t.Fatalf("CSDS without a token: %v, want Unauthenticated", err)
	}
	authed := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+p.readToken)
	resp, err := client.FetchClientStatus(authed, req)
	if err != nil {
		t.Fatalf("CSDS with the read token: %v", err)
	}
	if len(resp.GetConfig()) != 1 || resp.GetConfig()[0].GetNode().GetId() != "edge-tls" {
		t.Fatalf("CSDS answered %d configs, want edge-tls's", len(resp.GetConfig()))
	}
	synced := map[string]bool{}
	var secret *tlsv3.Secret
	for _, g := range resp.GetConfig()[0].GetGenericXdsConfigs() {
		if g.GetConfigStatus() == statusv3.ConfigStatus_SYNCED {
			synced[g.GetTypeUrl()] = true
		}
		if g.GetTypeUrl() == xdstype.SecretURL && g.GetXdsConfig() != nil {
			secret = &tlsv3.Secret{}
			if err := g.GetXdsConfig().UnmarshalTo(secret); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !synced[cds] || !synced[xdstype.SecretURL] {
		t.Fatalf("CSDS shows SYNCED for %v, want CDS and SDS", synced)
	}
	// The key is bytes: protojson would show it base64, so look inside.
	if secret.GetName() != "edge-cert" || strings.Contains(string(secret.GetTlsCertificate().GetPrivateKey().GetInlineBytes()), "TOPSECRETKEYMATERIAL") {
		t.Fatalf("CSDS leaks the key or lacks the Secret: %v", secret)
	}
	if text := protojson.Format(resp); strings.Contains(text, "TOPSECRETKEYMATERIAL") {
		t.Fatal("CSDS shows the key")
	}
}
