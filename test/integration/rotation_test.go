package integration

import (
	"os"
	"path/filepath"
	"testing"

	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"

	"github.com/pylon-xds/pylon/internal/daemon"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

const rotationConfig = `services:
- { name: web, endpoints: [{ address: 127.0.0.1, port: 8080 }] }
routes:
- { name: web, virtual_hosts: [{ name: web, domains: ["*"], routes: [{ to: [{ service: web }] }] }] }
listeners:
- { name: https, address: 127.0.0.1, port: 8443, routes: web, tls: { secret: edge-cert } }
secrets:
- { name: edge-cert, cert_file: certs/tls.crt, key_file: certs/tls.key }
resources:
# The scripted client's probe, to prove silence without sleeping.
- { "@type": type.googleapis.com/envoy.service.runtime.v3.Runtime, name: xdstest-probe, layer: {} }
`

// Rewriting a certificate file pushes the Secret, and nothing else.
func TestCertificateRotationPushesOnlySDS(t *testing.T) {
	dir := t.TempDir()
	certs := filepath.Join(dir, "certs")
	if err := os.Mkdir(certs, 0o755); err != nil {
		t.Fatal(err)
	}
	writeAtomically(t, filepath.Join(certs, "tls.crt"), "-----BEGIN CERTIFICATE-----\nFIRST\n-----END CERTIFICATE-----\n")
	writeAtomically(t, filepath.Join(certs, "tls.key"), "-----BEGIN PRIVATE KEY-----\nFIRSTKEY\n-----END PRIVATE KEY-----\n")
	cfg := filepath.Join(dir, "pylon.yaml")
	writeAtomically(t, cfg, rotationConfig)
	// A plaintext stream reads the Secret: it opts in to Secrets without
	// a client certificate (the mTLS tests check that refusal).
	p, _ := runPylon(t, daemon.Options{ConfigPath: cfg, InsecureServeSecrets: true})

	s := xdstest.OpenADS(t, xdstest.Dial(t, p.xdsAddr), xdstest.Node("edge-1"))
	subs := map[string][]string{
		xdstype.SecretURL:   {"edge-cert"},
		xdstype.ClusterURL:  nil,
		xdstype.EndpointURL: {"web"},
		xdstype.ListenerURL: nil,
		xdstype.RouteURL:    {"web"},
	}
	first := map[string]string{}
	for _, url := range []string{xdstype.SecretURL, xdstype.ClusterURL, xdstype.EndpointURL, xdstype.ListenerURL, xdstype.RouteURL} {
		s.Request(url, subs[url]...)
		first[url] = s.RecvType(url).VersionInfo
		s.Request(url, subs[url]...)
	}
	s.ExpectSilence()

	// A rotation, as cert-manager or an operator does it: new files renamed
	// over the old ones.
	writeAtomically(t, filepath.Join(certs, "tls.crt"), "-----BEGIN CERTIFICATE-----\nSECOND\n-----END CERTIFICATE-----\n")
	writeAtomically(t, filepath.Join(certs, "tls.key"), "-----BEGIN PRIVATE KEY-----\nSECONDKEY\n-----END PRIVATE KEY-----\n")
	var got *tlsv3.Secret
	for got == nil || string(got.GetTlsCertificate().GetPrivateKey().GetInlineBytes()) != "-----BEGIN PRIVATE KEY-----\nSECONDKEY\n-----END PRIVATE KEY-----\n" {
		r := s.RecvType(xdstype.SecretURL) // anything else first fails the test
		got = &tlsv3.Secret{}
		if err := r.Resources[0].UnmarshalTo(got); err != nil {
			t.Fatal(err)
		}
		if r.VersionInfo == first[xdstype.SecretURL] {
			t.Fatal("a rotated secret kept its version")
		}
		s.Request(xdstype.SecretURL, subs[xdstype.SecretURL]...)
	}
	// Nothing but the Secret moved.
	s.ExpectSilence()
}
