package daemon

import (
	"bufio"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pylon-xds/pylon/examples"
	"github.com/pylon-xds/pylon/internal/certs/certstest"
	"github.com/pylon-xds/pylon/internal/identity/identitytest"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// pylon_certificate_expiry_seconds shows, by kind, the earliest expiry of
// the Secrets' certificates the fleet serves, of Pylon's own xDS
// certificate and of the client certificates connected; the Secret's key
// is read by no one but the Secret and never reaches the log.
func TestCertificateExpiryMetricPerKind(t *testing.T) {
	dir := t.TempDir()
	ca := identitytest.NewCA(t, "expiry test CA")
	// Each kind ends at its own hour, all before the CA's day.
	until := map[string]time.Time{}
	for kind, h := range map[string]int{"client": 5, "secret": 10, "server": 20} {
		until[kind] = time.Now().Add(time.Duration(h) * time.Hour).Truncate(time.Second)
	}
	server := certstest.Server("pylon")
	server.NotAfter = until["server"]
	files := ca.CA.Issue(t, server).Write(t, ca.CA, dir, "xds")
	secret := certstest.Server("edge.example.com")
	secret.NotAfter = until["secret"]
	edge := ca.CA.Issue(t, secret)
	r := startDaemon(t, Options{XDSTLS: TLSFiles{Cert: files.Cert, Key: files.Key, ClientCA: files.CA}})

	// The config gains a Secret, its files beside it (the default secret
	// directory); the file source reloads it.
	folder := filepath.Dir(r.config)
	certstest.WriteFile(t, filepath.Join(folder, "edge.crt"), edge.CertPEM)
	certstest.WriteFile(t, filepath.Join(folder, "edge.key"), edge.KeyPEM)
	doc := string(examples.Quickstart()) + "\nsecrets:\n- { name: edge-cert, cert_file: edge.crt, key_file: edge.key }\n"
	certstest.WriteFile(t, r.config, []byte(doc))

	client := ca.IssueUntil(t, until["client"], "spiffe://example.org/ns/edge/sa/edge-1")
	st := xdstest.OpenADS(t, xdstest.DialTLS(t, r.xdsAddr, ca.ClientConfig(&client)), xdstest.Node("edge-1"))
	st.Request(xdstype.ClusterURL)
	st.RecvType(xdstype.ClusterURL)

	var got map[string]float64
	waitFor(t, 10*time.Second, "an expiry series of every kind", func() bool {
		got = expirySeries(t, r)
		return len(got) == 3
	})
	now := time.Now()
	for kind, at := range until {
		// The scrape was a moment ago: a minute of slack.
		if want := at.Sub(now).Seconds(); got[kind] > want+60 || got[kind] < want-60 {
			t.Errorf("kind=%s: %v s, want about %v s (%v)", kind, got[kind], want, at)
		}
	}
	if strings.Contains(r.out.String(), strings.TrimSpace(string(edge.KeyPEM))[40:100]) {
		t.Errorf("the log shows the Secret's key:\n%s", r.out.String())
	}
}

// expirySeries scrapes /metrics (open) for pylon_certificate_expiry_seconds
// by kind.
func expirySeries(t *testing.T, r *running) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(r.get(t, "/metrics")))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), `pylon_certificate_expiry_seconds{kind="`)
		if !ok {
			continue
		}
		kind, value, ok := strings.Cut(rest, `"} `)
		if !ok {
			t.Fatalf("unexpected series line %q", sc.Text())
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			t.Fatalf("series line %q: %v", sc.Text(), err)
		}
		out[kind] = v
	}
	return out
}
