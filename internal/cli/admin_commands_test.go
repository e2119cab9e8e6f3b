package cli

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/pylon-xds/pylon/internal/ctl"
)

// testPylon is a `pylon serve` run in process by the CLI itself.
type testPylon struct {
	admin, xds, dataDir string
	env                 map[string]string
}

// startServe runs `pylon serve` with args on loopback and returns once it
// logged its addresses; the test's cleanup stops it and checks it exited.
func startServe(t *testing.T, args ...string) *testPylon {
	t.Helper()
	d := &testPylon{dataDir: t.TempDir(), env: map[string]string{}}
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	all := append([]string{"serve", "--xds-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--data-dir", d.dataDir,
		"--log-format", "json", "--debounce", "10ms", "--debounce-max", "50ms"}, args...)
	go func() {
		done <- Execute(ctx, all, io.Discard, pw)
		pw.Close()
	}()
	lines := bufio.NewScanner(pr)
	for lines.Scan() {
		var rec map[string]any
		if json.Unmarshal(lines.Bytes(), &rec) == nil && rec["msg"] == "pylon serving" {
			d.admin, _ = rec["admin"].(string)
			d.xds, _ = rec["xds"].(string)
			break
		}
	}
	drained := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, pr); close(drained) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			t.Error("serve did not stop")
		}
		<-drained
	})
	if d.admin == "" {
		cancel()
		t.Fatalf("serve never logged its addresses (exit %d)", <-done)
	}
	return d
}

// cli runs the CLI against d with d's environment (nothing from the
// process's own) and the data folder given by --data-dir.
func (d *testPylon) cli(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	args = append(args, "--admin-addr", d.admin, "--data-dir", d.dataDir)
	code = execute(context.Background(), args, &out, &errb, func(k string) string { return d.env[k] })
	return code, out.String(), errb.String()
}

// must runs the CLI and fails the test on a non-zero exit.
func (d *testPylon) must(t *testing.T, args ...string) string {
	t.Helper()
	code, out, stderr := d.cli(args...)
	if code != 0 {
		t.Fatalf("pylon %v: exit %d: %s", args, code, stderr)
	}
	return out
}

// eventually polls cond until it holds, for at most 10s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	// Written beside and renamed, so the watcher never reads half a file.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

const goodCluster = `{"version":1,"resources":[{"@type":"type.googleapis.com/envoy.config.cluster.v3.Cluster","name":"c","connect_timeout":"1s"}]}`

// a refused config is the first thing `pylon status` shows, with
// each diagnostic as the server wrote it.
func TestStatusShowsRefusedConfigFirst(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "pylon.json")
	writeFile(t, cfg, goodCluster)
	d := startServe(t, "--config", cfg)
	if out := d.must(t, "status"); strings.Contains(out, "REFUSED") {
		t.Fatalf("a good config shown refused:\n%s", out)
	}
	writeFile(t, cfg, `{"version":1,"resources":[{"@type":"type.googleapis.com/envoy.config.cluster.v3.Cluster","name":"c","conect_timeout":"1s"},`+
		`{"@type":"type.googleapis.com/envoy.config.cluster.v3.Cluster","name":"d","connect_timeout":"soon"}]}`)
	var out string
	eventually(t, "the refusal in pylon status", func() bool {
		out = d.must(t, "status")
		return strings.Contains(out, "REFUSED")
	})
	lines := strings.Split(out, "\n")
	if !strings.HasPrefix(lines[0], "CONFIG REFUSED at ") || !strings.Contains(lines[0], "still serving the previous config, version ") {
		t.Errorf("the refusal is not the first line:\n%s", out)
	}
	for _, want := range []string{`pylon.json:1: Cluster "c": conect_timeout: unknown field "conect_timeout"`, `pylon.json:1: Cluster "d": connect_timeout: not a valid duration (write it like "1.5s" or "0.250s", within about ±10000 years)`} {
		if !regexp.MustCompile(`(?m)^  /\S*/` + regexp.QuoteMeta(want) + `$`).MatchString(out) {
			t.Errorf("status lacks the diagnostic %q:\n%s", want, out)
		}
	}
	if !strings.Contains(out, "NAME   GROUP") {
		t.Errorf("the proxy table is missing after the refusal:\n%s", out)
	}
	// The same refusal is in the machine-readable forms.
	var st struct {
		Status struct {
			Config struct {
				Refused struct{ Diagnostics []map[string]any } `json:"refused"`
			} `json:"config"`
		} `json:"status"`
	}
	if err := json.Unmarshal([]byte(d.must(t, "status", "-o", "json")), &st); err != nil || len(st.Status.Config.Refused.Diagnostics) != 2 {
		t.Errorf("status -o json: %v, %+v", err, st)
	}
}

// every read command takes -o table|json|yaml, and refuses any
// other format before it makes a request.
func TestReadCommandsOutputFormats(t *testing.T) {
	d := startServe(t)
	for _, args := range [][]string{
		{"status"}, {"get", "proxies"}, {"get", "objects"}, {"get", "clusters"}, {"get", "listeners"},
		{"get", "routes"}, {"get", "endpoints"}, {"get", "secrets"}, {"history"}, {"diff", "1"}, {"endpoints", "list"},
	} {
		js := d.must(t, append(args, "-o", "json")...)
		if !json.Valid([]byte(js)) {
			t.Errorf("pylon %v -o json is not JSON:\n%s", args, js)
		}
		y := d.must(t, append(args, "-o", "yaml")...)
		if j, err := yaml.YAMLToJSON([]byte(y)); err != nil || !json.Valid(j) || strings.HasPrefix(strings.TrimSpace(y), "{") {
			t.Errorf("pylon %v -o yaml is not YAML: %v\n%s", args, err, y)
		}
		d.must(t, append(args, "-o", "table")...)
		code, out, stderr := run(append(args, "-o", "xml", "--admin-addr", "127.0.0.1:1")...)
		if code != 1 || out != "" || !strings.Contains(stderr, `-o "xml": want table, json or yaml`) {
			t.Errorf("pylon %v -o xml: exit %d, %q %q", args, code, out, stderr)
		}
	}
}

// testCert writes a self-signed certificate and its key into dir; the
// certificate expires at notAfter.
func testCert(t *testing.T, dir string, notAfter time.Time) (certFile, keyFile string, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "shop.test"}, DNSNames: []string{"shop.test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: notAfter,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8})
	certFile, keyFile = filepath.Join(dir, "shop.crt"), filepath.Join(dir, "shop.key")
	writeFile(t, certFile, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})))
	writeFile(t, keyFile, string(keyPEM))
	return certFile, keyFile, keyPEM
}

// shopDoc is a document with every kind `pylon get` shows: services (one
// endpoint unhealthy), routes with domains, a TLS listener, a secret.
const shopDoc = `version: 1
services:
- name: web
  endpoints:
  - { address: 10.0.0.1, port: 8080, zone: z1 }
  - { address: 10.0.0.2, port: 8080, zone: z2, health: unhealthy }
- name: api
  endpoints:
  - { address: 10.0.0.3, port: 9090 }
routes:
- name: public
  virtual_hosts:
  - name: shop
    domains: [shop.test, www.shop.test]
    routes:
    - match: { prefix: /api }
      to: [{ service: api }]
    - to: [{ service: web }]
listeners:
- name: https
  port: 8443
  routes: public
  tls: { secret: shop-cert }
secrets:
- { name: shop-cert, cert_file: CERT, key_file: KEY }
`

// row finds the table line whose cells start with the given ones.
func row(out string, cells ...string) string {
	pat := `(?m)^` + strings.Join(quoteAll(cells), `\s+`) + `(\s.*)?$`
	return regexp.MustCompile(pat).FindString(out)
}

func quoteAll(s []string) []string {
	out := make([]string, len(s))
	for i, c := range s {
		out[i] = regexp.QuoteMeta(c)
	}
	return out
}

// get shows the columns an operator reads (istioctl proxy-config
// style), a certificate's expiry read from the certificate, and never the
// key; endpoints add takes IPv6.
func TestGetShowsUsefulColumns(t *testing.T) {
	secrets := t.TempDir()
	notAfter := time.Date(2031, 2, 3, 4, 5, 6, 0, time.UTC)
	certFile, keyFile, keyPEM := testCert(t, secrets, notAfter)
	d := startServe(t, "--secret-dir", secrets)
	doc := filepath.Join(t.TempDir(), "shop.yaml")
	writeFile(t, doc, strings.NewReplacer("CERT", certFile, "KEY", keyFile).Replace(shopDoc))
	d.must(t, "apply", "-f", doc)
	d.must(t, "endpoints", "add", "api", "[::1]:9091")

	get := func(kind string, cells ...string) string {
		t.Helper()
		var out string
		eventually(t, "pylon get "+kind+" to show "+strings.Join(cells, " "), func() bool {
			out = d.must(t, "get", kind)
			return row(out, cells...) != ""
		})
		return out
	}
	get("clusters", "default", "web", "EDS", "2", "1")
	get("clusters", "default", "api", "EDS", "2", "2")
	get("endpoints", "default", "api", "[::1]:9091", "UNKNOWN", "1")
	get("endpoints", "default", "web", "10.0.0.2:8080", "UNHEALTHY", "1", "z2")
	get("listeners", "default", "https", "0.0.0.0", "8443", "RDS public")
	get("routes", "default", "public", "shop", "shop.test,www.shop.test", "2", "api, web")
	out := get("secrets", "default", "shop-cert", "certificate", "2031-02-03T04:05:06Z")
	if r := row(out, "default", "shop-cert"); !strings.Contains(r, "valid, ") || !strings.Contains(r, "shop.test") {
		t.Errorf("secret row %q: want its state and its names", r)
	}
	keyBody := strings.Join(strings.Split(string(keyPEM), "\n")[1:3], "")
	for _, args := range [][]string{{"get", "secrets"}, {"get", "secrets", "-o", "yaml"}, {"get", "secrets", "-o", "json"}} {
		if o := d.must(t, args...); strings.Contains(o, "PRIVATE KEY") || strings.Contains(o, keyBody[:40]) {
			t.Errorf("pylon %v shows the key:\n%s", args, o)
		}
	}
}

// a --group that matches nothing says so and lists the groups, not
// an empty table.
func TestGetUnknownGroup(t *testing.T) {
	d := startServe(t)
	code, out, stderr := d.cli("get", "clusters", "--group", "nope")
	if code != 1 || out != "" || !strings.Contains(stderr, `no group named "nope": the groups are default`) {
		t.Fatalf("exit %d, %q, %q", code, out, stderr)
	}
	if out := d.must(t, "get", "clusters", "--group", "default"); row(out, "default", "backend", "EDS") == "" {
		t.Fatalf("--group default:\n%s", out)
	}
}

// the tokens are found from the data folder wherever the CLI is
// run: --data-dir, else $PYLON_DATA_DIR; or from $PYLON_TOKEN and
// $PYLON_READ_TOKEN. A missing token names the absolute paths looked at.
func TestTokensFromDataDirOrEnvironment(t *testing.T) {
	d := startServe(t)
	t.Chdir(t.TempDir()) // not where serve keeps its data

	env := func(vars map[string]string, args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := execute(context.Background(), append(args, "--admin-addr", d.admin), &out, &errb, func(k string) string { return vars[k] })
		return code, out.String(), errb.String()
	}
	if code, _, stderr := env(nil, "history"); code != 1 || !strings.Contains(stderr, filepath.Join(mustGetwd(t), "pylon-data", "read-token")) {
		t.Errorf("no token anywhere: exit %d, %q; want the absolute path looked at", code, stderr)
	}
	if code, _, stderr := env(map[string]string{"PYLON_DATA_DIR": d.dataDir}, "history"); code != 0 {
		t.Errorf("$PYLON_DATA_DIR: exit %d, %s", code, stderr)
	}
	if code, _, stderr := env(nil, "history", "--data-dir", d.dataDir); code != 0 {
		t.Errorf("--data-dir: exit %d, %s", code, stderr)
	}
	read := readFile(t, filepath.Join(d.dataDir, "read-token"))
	write := readFile(t, filepath.Join(d.dataDir, "admin-token"))
	if code, _, stderr := env(map[string]string{"PYLON_READ_TOKEN": read}, "history"); code != 0 {
		t.Errorf("$PYLON_READ_TOKEN: exit %d, %s", code, stderr)
	}
	// The read token cannot write; $PYLON_TOKEN can.
	if code, _, stderr := env(map[string]string{"PYLON_TOKEN": read}, "rollback", "1", "--dry-run"); code != 1 || !strings.Contains(stderr, "the read token does not authorise writes") {
		t.Errorf("a write with the read token: exit %d, %s", code, stderr)
	}
	if code, out, stderr := env(map[string]string{"PYLON_TOKEN": write}, "rollback", "1", "--dry-run"); code != 0 || !strings.Contains(out, "dry run") {
		t.Errorf("$PYLON_TOKEN: exit %d, %s %s", code, out, stderr)
	}
	if code, _, stderr := env(nil, "rollback", "1", "--dry-run"); code != 1 || !strings.Contains(stderr, "$PYLON_TOKEN") {
		t.Errorf("a write without a token: exit %d, %q", code, stderr)
	}
}

func mustGetwd(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return wd
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// apply sends the document's type from its
// extension; the API reads YAML and JSON by Content-Type. A recording
// server on loopback stands in for Pylon to see the header.
func TestApplyContentTypeFromExtension(t *testing.T) {
	got := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("Content-Type")
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"revision":2,"version":"v"}`)
	}))
	defer srv.Close()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "token"), "t0k")
	for name, want := range map[string]string{"a.yaml": "application/yaml", "b.YML": "application/yaml", "c.json": "application/json"} {
		p := filepath.Join(dir, name)
		writeFile(t, p, "version: 1\n")
		if code, _, stderr := run("apply", "-f", p, "--admin-addr", strings.TrimPrefix(srv.URL, "http://"), "--token-file", filepath.Join(dir, "token")); code != 0 {
			t.Fatalf("apply %s: exit %d %s", name, code, stderr)
		}
		if ct := <-got; ct != want {
			t.Errorf("apply -f %s sent Content-Type %q, want %q", name, ct, want)
		}
	}
	p := filepath.Join(dir, "notes.txt")
	writeFile(t, p, "version: 1\n")
	if code, _, stderr := run("apply", "-f", p, "--admin-addr", strings.TrimPrefix(srv.URL, "http://"), "--token-file", filepath.Join(dir, "token")); code != 1 || !strings.Contains(stderr, ".yaml, .yml or .json") {
		t.Errorf("apply -f notes.txt: exit %d, %q", code, stderr)
	}
}

// endpoints add builds its request from a struct: IPv6 works, a
// --ttl given is always sent (so 0s reaches the server and is refused
// there), no --ttl is a permanent endpoint, and an argument cannot add a
// field.
func TestEndpointsAddRequest(t *testing.T) {
	d := startServe(t)
	doc := filepath.Join(t.TempDir(), "svc.yaml")
	writeFile(t, doc, "version: 1\nservices:\n- name: api\n  endpoints: [{ address: 10.0.0.3, port: 9090 }]\n")
	d.must(t, "apply", "-f", doc)

	for _, ttl := range []string{"0s", "-5s"} {
		code, _, stderr := d.cli("endpoints", "add", "api", "10.0.0.4:80", "--ttl", ttl)
		if code != 1 || !strings.Contains(stderr, `ttl: "`+ttl+`" is not a positive duration`) || !strings.Contains(stderr, "400") {
			t.Errorf("--ttl %s: exit %d, %q; want the server's 400", ttl, code, stderr)
		}
	}
	code, _, stderr := d.cli("endpoints", "add", "api", `10.0.0.5:80","weight":9,"x":"`)
	if code != 1 || !strings.Contains(stderr, "ADDRESS:PORT") {
		t.Errorf("an argument with JSON in it: exit %d, %q", code, stderr)
	}
	d.must(t, "endpoints", "add", "api", "[::1]:8080")
	d.must(t, "endpoints", "add", "api", "10.0.0.6:80", "--ttl", "30s", "--weight", "3")
	var objs struct {
		Objects []struct {
			Kind, Name string
			Body       struct{ Weight uint32 }
			Expires    time.Time
		}
	}
	if err := json.Unmarshal([]byte(d.must(t, "get", "objects", "-o", "json")), &objs); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, o := range objs.Objects {
		if o.Kind != "endpoints.api" {
			continue
		}
		seen[o.Name] = true
		switch o.Name {
		case "[::1]:8080":
			if !o.Expires.IsZero() {
				t.Errorf("without --ttl the endpoint has a lease until %s", o.Expires)
			}
		case "10.0.0.6:80":
			if o.Expires.IsZero() || o.Body.Weight != 3 {
				t.Errorf("--ttl 30s --weight 3: expires %s, weight %d", o.Expires, o.Body.Weight)
			}
		default:
			t.Errorf("registered %q", o.Name)
		}
	}
	if len(seen) != 2 {
		t.Fatalf("registered %v, want [::1]:8080 and 10.0.0.6:80", seen)
	}
	list := d.must(t, "endpoints", "list", "api")
	if row(list, "api", "[::1]:8080", "1", "unknown", "never") == "" || !regexp.MustCompile(`(?m)^api\s+10\.0\.0\.6:80\s+3\s+unknown\s+20\d\d-`).MatchString(list) {
		t.Errorf("endpoints list api:\n%s", list)
	}
	if other := d.must(t, "endpoints", "list", "web"); strings.Contains(other, "10.0.0.6") {
		t.Errorf("endpoints list web shows api's endpoints:\n%s", other)
	}
	d.must(t, "endpoints", "remove", "api", "[::1]:8080")
	if code, _, stderr := d.cli("endpoints", "remove", "api", "[::1]:8080"); code != 1 || !strings.Contains(stderr, "404") {
		t.Errorf("removing it twice: exit %d, %q", code, stderr)
	}
}

// validate takes the path as an argument as well as --config, and
// a file with several mistakes reports every one.
func TestValidateArgumentAndEveryDiagnostic(t *testing.T) {
	if code, out, stderr := run("validate", "../../examples/quickstart.yaml"); code != 0 || !strings.HasPrefix(out, "ok: version ") {
		t.Fatalf("validate FILE: exit %d, %q %q", code, out, stderr)
	}
	code, _, stderr := run("validate", "testdata/several_errors.yaml")
	if code != 1 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{
		`several_errors.yaml:5: service "web": conect_timeout: unknown field "conect_timeout"`,
		`several_errors.yaml:10: Cluster "raw": connect_timeout: not a valid duration (write it like "1.5s" or "0.250s", within about ±10000 years)`,
		`several_errors.yaml:13: Cluster "other": tipe: unknown field`,
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("validate misses %q:\n%s", want, stderr)
		}
	}
	if code, _, stderr := run("validate", "a.yaml", "--config", "b.yaml"); code != 1 || !strings.Contains(stderr, "give one") {
		t.Errorf("two paths: exit %d, %q", code, stderr)
	}
	if code, _, stderr := run("validate"); code != 1 || !strings.Contains(stderr, "no config given") {
		t.Errorf("no path: exit %d, %q", code, stderr)
	}
}

// version comes from the build info: the module version and the
// VCS commit, never "dev".
func TestVersionFromBuildInfo(t *testing.T) {
	info := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/pylon-xds/pylon", Version: "v0.3.1"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0a091f3c"}, {Key: "vcs.time", Value: "2026-12-01T05:00:00Z"}, {Key: "vcs.modified", Value: "true"}}}
	for _, c := range []struct {
		override string
		info     *debug.BuildInfo
		ok       bool
		version  string
		detail   string
	}{
		{"", info, true, "v0.3.1", "commit 0a091f3c (2026-12-01T05:00:00Z), modified, go1.26.8"},
		{"v1.0.0", info, true, "v1.0.0", "commit 0a091f3c (2026-12-01T05:00:00Z), modified, go1.26.8"},
		{"", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}}, true, "(devel)", "no VCS commit recorded, go1.26.8"},
		{"", nil, false, "unknown", "no build info in this binary"},
	} {
		v, detail := ctl.BuildVersion(c.override, c.info, c.ok)
		if v != c.version || detail != c.detail {
			t.Errorf("buildVersion(%q, ...) = %q, %q; want %q, %q", c.override, v, detail, c.version, c.detail)
		}
	}
	code, out, _ := run("version")
	if code != 0 || !strings.HasPrefix(out, "pylon ") || strings.Contains(out, "dev\n") || !strings.Contains(out, "go1.") {
		t.Fatalf("version: exit %d, %q", code, out)
	}
}

// diff is the server's unified diff of YAML between two revisions;
// endpoints only with --endpoints, as the history.
func TestDiffIsUnifiedYAML(t *testing.T) {
	d := startServe(t)
	doc := filepath.Join(t.TempDir(), "svc.yaml")
	writeFile(t, doc, "version: 1\nservices:\n- name: api\n  endpoints: [{ address: 10.0.0.3, port: 9090 }]\n")
	d.must(t, "apply", "-f", doc)
	d.must(t, "endpoints", "add", "api", "10.0.0.9:80")
	out := d.must(t, "diff", "1")
	for _, want := range []string{"--- revision 1\n", "+++ revision 3\n", "\n+# services/api\n", "\n+name: api\n", "\n+  port: 9090\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("diff 1 lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "10.0.0.9") {
		t.Errorf("diff shows a registered endpoint without --endpoints:\n%s", out)
	}
	if out := d.must(t, "diff", "1", "--endpoints"); !strings.Contains(out, "+address: 10.0.0.9\n") {
		t.Errorf("diff 1 --endpoints:\n%s", out)
	}
	if out := d.must(t, "diff", "2", "2"); out != "" {
		t.Errorf("a revision against itself: %q", out)
	}
	if code, _, stderr := d.cli("diff", "abc"); code != 1 || !strings.Contains(stderr, `from: "abc" is not a revision number (400 Bad Request)`) {
		t.Errorf("diff abc: exit %d, %q", code, stderr)
	}
}
