package integration

import (
	"net/http"
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
	cfg := filepath.Join(dir, "pylon.yaml")
	writeCerts(t, dir, "FIRST")
	writeAtomically(t, cfg, rotationConfig)
	// A plaintext stream reads the Secret: it opts in to Secrets without
	// a client certificate (the mTLS tests check that refusal).
	p, _ := runPylon(t, daemon.Options{ConfigPath: cfg, InsecureServeSecrets: true})
	rotateAndExpectOnlySDS(t, p, dir)
}

// In the default mode the config is in the embedded store, not in a
// watched file, and certificates are watched all the same: a rotation is
// pushed with no write through the API (issue 13 item 2).
func TestCertificateRotationInStoreMode(t *testing.T) {
	dir := t.TempDir()
	writeCerts(t, dir, "FIRST")
	// Relative certificate paths in store mode are under the first secret
	// directory.
	p, _ := runPylon(t, daemon.Options{DataDir: t.TempDir(), SecretDirs: []string{dir}, InsecureServeSecrets: true})
	p.token = readToken(t, p.dataDir)
	if code, res := p.api(t, "POST", "/v1/apply", rotationConfig); code != http.StatusOK {
		t.Fatalf("apply: %d %v", code, res)
	}
	version, history := p.status(t).Version, p.get(t, "/v1/history")
	rotateAndExpectOnlySDS(t, p, dir)
	if after := p.get(t, "/v1/history"); after != history {
		t.Fatalf("the rotation wrote to the store:\nbefore %s\nafter  %s", history, after)
	}
	if p.status(t).Version == version {
		t.Fatal("the served config's version did not move with the rotated Secret")
	}
}

func writeCerts(t *testing.T, dir, mark string) {
	t.Helper()
	certs := filepath.Join(dir, "certs")
	if err := os.MkdirAll(certs, 0o755); err != nil {
		t.Fatal(err)
	}
	writeAtomically(t, filepath.Join(certs, "tls.crt"), "-----BEGIN CERTIFICATE-----\n"+mark+"\n-----END CERTIFICATE-----\n")
	writeAtomically(t, filepath.Join(certs, "tls.key"), "-----BEGIN PRIVATE KEY-----\n"+mark+"KEY\n-----END PRIVATE KEY-----\n")
}

// rotateAndExpectOnlySDS subscribes a raw ADS client to the rotation
// config, rotates the certificate under dir and expects the new Secret,
// with a new version, and nothing else.
func rotateAndExpectOnlySDS(t *testing.T, p *pylon, dir string) {
	t.Helper()
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
	writeCerts(t, dir, "SECOND")
	const want = "-----BEGIN PRIVATE KEY-----\nSECONDKEY\n-----END PRIVATE KEY-----\n"
	var got *tlsv3.Secret
	// Bounded: each RecvType waits a bounded time, and the two files
	// written one after the other are at most two pushes.
	for i := 0; got == nil || string(got.GetTlsCertificate().GetPrivateKey().GetInlineBytes()) != want; i++ {
		if i == 3 {
			t.Fatal("the rotated key was not pushed")
		}
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
