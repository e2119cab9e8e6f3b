package matrix

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/certs/certstest"
	"github.com/pylon-xds/pylon/internal/cli"
	"github.com/pylon-xds/pylon/internal/daemon"
	"github.com/pylon-xds/pylon/internal/daemon/daemontest"
	"github.com/pylon-xds/pylon/internal/rollout"
	"github.com/pylon-xds/pylon/internal/store/etcd/etcdtest"
)

// bound bounds every wait for a condition.
const bound = 15 * time.Second

// Nodes claim the cluster nodeCluster; their certificates prove
// spiffe://example.org/ns/matrix/sa/{id}. Entitled nodes' ids start with
// "ent-", the only identities the restricted Secrets and the vault group
// allow.
const (
	nodeCluster     = "matrix"
	nodeIdentity    = "spiffe://{trust_domain}/ns/{cluster}/sa/{id}"
	entitledPattern = "spiffe://example.org/ns/matrix/sa/ent-*"
)

// fleet is one setup of the matrix: one or two replicas (on etcd) serving
// the same config, in one rollout state, with the planted keys.
type fleet struct {
	t      *testing.T
	state  string // plain, mid-stage, halted
	dir    string // the secret directory: the model secrets' files
	ca     *certstest.CA
	server certstest.Files
	ms     markers
	reps   []*replica
	// revA is the revision of the config without the doomed Secret, the
	// one the fleet is rolled (back) to.
	revA int64
}

// replica is one running daemon.
type replica struct {
	name                  string
	xds, admin, rest      string
	data, writeTok, token string // token: the read token
	log                   *daemontest.LogBuffer
}

// newFleet plants the markers and starts n replicas (n > 1: on one
// embedded etcd, n == 1: the embedded bolt store).
func newFleet(t *testing.T, n int, state string) *fleet {
	t.Helper()
	f := &fleet{t: t, state: state, dir: t.TempDir(), ca: certstest.NewCA(t, "matrix-ca")}
	f.server = f.ca.Issue(t, certstest.Server("pylon")).Write(t, f.ca, t.TempDir(), "server")
	f.ms = markers{
		"restricted": newMarker(t, f.ca, "restricted", "a restricted Secret"),
		"doomed":     newMarker(t, f.ca, "doomed", "finding 1 (a deleted Secret entitled by the new policy)"),
		"inline":     newMarker(t, f.ca, "inline", "finding 2 (a key inline in a Listener or Cluster)"),
		"jwks":       newMarker(t, f.ca, "jwks", "finding 2 (JWKS private members)"),
		"wrapped":    newMarker(t, f.ca, "wrapped", "finding 4 (wrapped or offset base64 in stored objects)"),
	}
	for _, name := range []string{"restricted", "doomed"} {
		certstest.WriteFile(t, filepath.Join(f.dir, name+".crt"), []byte(f.ms[name].certPEM))
		certstest.WriteFile(t, filepath.Join(f.dir, name+".key"), []byte(f.ms[name].keyPEM))
	}
	certstest.WriteFile(t, filepath.Join(f.dir, "public-ca.crt"), f.ca.PEM)
	var endpoint string
	if n > 1 {
		endpoint = etcdtest.Start(t).Endpoint()
	}
	for i := range n {
		f.reps = append(f.reps, f.start(fmt.Sprintf("pylon-%d", i), endpoint))
	}
	return f
}

// start runs one replica until the test ends: xDS and REST over TLS with
// client certificates verified when given (not required, so that the
// unverified client connects), node ids bound to them, a JSON debug log
// captured.
func (f *fleet) start(name, etcdEndpoint string) *replica {
	t := f.t
	t.Helper()
	r := &replica{name: name, data: t.TempDir(), log: &daemontest.LogBuffer{}}
	o := daemon.Options{
		DataDir: r.data, Identifier: name,
		DebounceQuiet: daemontest.Quiet, DebounceMax: daemontest.MaxWait,
		XDSTLS:       daemon.TLSFiles{Cert: f.server.Cert, Key: f.server.Key, ClientCA: f.server.CA},
		NodeIdentity: nodeIdentity, TrustDomain: "example.org",
		SecretDirs: []string{f.dir},
		Logger:     slog.New(slog.NewJSONHandler(r.log, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if etcdEndpoint != "" {
		o.Store = daemon.StoreEtcd
		o.Etcd = daemon.EtcdOptions{
			Endpoints: []string{etcdEndpoint},
			Timeout:   500 * time.Millisecond, Probe: 100 * time.Millisecond, StartTimeout: bound,
		}
	}
	o.REST.Addr = "127.0.0.1:0"
	listening := make(chan string, 1)
	o.REST.OnListen = func(addr string) { listening <- addr }
	d := daemontest.Start(t, o)
	r.xds, r.admin, r.rest = d.XDS, d.Admin, <-listening
	r.writeTok, r.token = d.Token(t, "admin-token"), d.Token(t, "read-token")
	return r
}

// call sends one admin request with token and returns the status and body.
func (r *replica) call(t *testing.T, token, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+r.admin+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// get is a read with the read token that must succeed.
func (r *replica) get(t *testing.T, path string) string {
	t.Helper()
	code, body := r.call(t, r.token, "GET", path, "")
	if code != http.StatusOK {
		t.Fatalf("%s GET %s: %d %.400s", r.name, path, code, body)
	}
	return body
}

// write is a write with the write token that must succeed; it returns the
// revision and version written.
func (r *replica) write(t *testing.T, method, path, body string) (int64, string) {
	t.Helper()
	code, resp := r.call(t, r.writeTok, method, path, body)
	if code != http.StatusOK && code != http.StatusCreated {
		t.Fatalf("%s %s %s: %d %.600s", r.name, method, path, code, resp)
	}
	var res struct {
		Revision int64
		Version  string
	}
	if err := json.Unmarshal([]byte(resp), &res); err != nil {
		t.Fatalf("%s %s: %v: %s", method, path, err, resp)
	}
	return res.Revision, res.Version
}

func (r *replica) rollouts(t *testing.T) []rollout.Status {
	t.Helper()
	var body struct{ Rollouts []rollout.Status }
	if err := json.Unmarshal([]byte(r.get(t, "/v1/rollouts")), &body); err != nil {
		t.Fatal(err)
	}
	return body.Rollouts
}

// rolloutOf is the rollout of group on r (nil: none).
func (r *replica) rolloutOf(t *testing.T, group string) *rollout.Status {
	t.Helper()
	for _, s := range r.rollouts(t) {
		if s.Group == group {
			return &s
		}
	}
	return nil
}

// waitUntil polls cond until it holds, at most bound.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", bound, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// published waits until every replica serves version.
func (f *fleet) published(version string) {
	f.t.Helper()
	for _, r := range f.reps {
		r.serves(f.t, version)
	}
}

// serves waits until r serves version.
func (r *replica) serves(t *testing.T, version string) {
	t.Helper()
	waitUntil(t, r.name+" to serve "+version, func() bool {
		return strings.Contains(r.get(t, "/status"), version)
	})
}

// settle completes every rollout on every replica (promoting stage by
// stage), so that the next change starts from a fleet on one version.
func (f *fleet) settle() {
	f.t.Helper()
	for _, r := range f.reps {
		for range 8 {
			rs := r.rollouts(f.t)
			if len(rs) == 0 {
				break
			}
			for _, s := range rs {
				r.write(f.t, "POST", "/v1/rollouts/"+s.Group+"/promote", "")
			}
		}
		if rs := r.rollouts(f.t); len(rs) != 0 {
			f.t.Fatalf("%s: rollouts left after promoting: %+v", r.name, rs)
		}
	}
}

// rolloutPolicy is both groups' policy: canaries chosen by metadata, then
// half the nodes by the hash of their ids; hour-long bakes, so that a
// stage lasts the test.
const rolloutPolicy = `{"stages": [{"selector": {"metadata": {"canary": "true"}}, "bake": "1h"}, {"share": "50%", "bake": "1h"}], "halt": {"on_nack": true}}`

// configA is the config the fleet is rolled to (v2): two groups, the
// restricted Secret, the raw Secret "wrapped" (its certificate chain a
// combined cert+key PEM, as a combined file is often used, in base64
// wrapped at 76 columns, so the key sits at an offset, where no field
// name says it is a key), the cluster web at 2s. The
// vault group takes the entitled nodes only and sees everything; edge
// takes every other node and sees no raw Secret.
func (f *fleet) configA() string {
	policy := ""
	if f.state != "plain" {
		policy = `, "rollout": ` + rolloutPolicy
	}
	combined := base64.StdEncoding.EncodeToString([]byte(f.ms["wrapped"].certPEM + f.ms["wrapped"].keyPEM))
	return `{
 "groups": [
  {"name": "vault", "identities": [` + js(entitledPattern) + `]` + policy + `},
  {"name": "edge", "default": true, "scope": {"secrets": ["[^w]*"], "clusters": ["web"], "runtimes": ["xdstest-probe"]}` + policy + `}
 ],
 "secrets": [
  {"name": "restricted", "cert_file": ` + js(filepath.Join(f.dir, "restricted.crt")) + `, "key_file": ` + js(filepath.Join(f.dir, "restricted.key")) + `, "identities": [` + js(entitledPattern) + `]},
  {"name": "public-ca", "ca_file": ` + js(filepath.Join(f.dir, "public-ca.crt")) + `}
 ],
 "resources": [
  {"@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret", "name": "wrapped",
   "tlsCertificate": {"certificateChain": {"inlineBytes": ` + js(wrap(combined, 76)) + `}, "privateKey": {"inlineString": ` + js(f.ms["wrapped"].keyPEM) + `}}},
  ` + cluster(2) + `,
  {"@type": "type.googleapis.com/envoy.service.runtime.v3.Runtime", "name": "xdstest-probe"}
 ]
}`
}

// configB adds the doomed Secret (restricted like the other) and sets the
// cluster to 1s: the previous version (v1) of the rollout.
func (f *fleet) configB() string {
	return `{
 "secrets": [
  {"name": "doomed", "cert_file": ` + js(filepath.Join(f.dir, "doomed.crt")) + `, "key_file": ` + js(filepath.Join(f.dir, "doomed.key")) + `, "identities": [` + js(entitledPattern) + `]}
 ],
 "resources": [` + cluster(1) + `]
}`
}

func cluster(seconds int) string {
	return fmt.Sprintf(`{"@type": "type.googleapis.com/envoy.config.cluster.v3.Cluster", "name": "web", "type": "STATIC", "connectTimeout": "%ds"}`, seconds)
}

func js(v any) string { b, _ := json.Marshal(v); return string(b) }

// prepare brings the fleet to its state: v1 (configA plus configB) served
// to every node, then one change, a rollback to configA, that deletes the
// doomed Secret and changes the cluster. Without a policy every node gets
// it; with one, a rollout of both groups starts at stage 1 on every
// replica.
func (f *fleet) prepare() {
	t := f.t
	t.Helper()
	r := f.reps[0]
	var version string
	f.revA, version = r.write(t, "POST", "/v1/apply", f.configA())
	f.published(version)
	f.settle()
	_, version = r.write(t, "POST", "/v1/apply", f.configB())
	f.published(version)
	f.settle()
	_, version = r.write(t, "POST", fmt.Sprintf("/v1/rollback/%d", f.revA), "")
	if f.state == "plain" {
		f.published(version)
		return
	}
	for _, r := range f.reps {
		for _, g := range []string{"vault", "edge"} {
			waitUntil(t, r.name+": the rollout of "+g+" at stage 1", func() bool {
				s := r.rolloutOf(t, g)
				return s != nil && s.Stage == 1 && s.Halted == ""
			})
		}
	}
}

// cli runs a pylon command against r; its output and errors.
func (r *replica) cli(t *testing.T, args ...string) (int, string) {
	t.Helper()
	var out, errb bytes.Buffer
	args = append(args, "--admin-addr", r.admin,
		"--token-file", filepath.Join(r.data, "admin-token"), "--read-token-file", filepath.Join(r.data, "read-token"))
	code := cli.Execute(context.Background(), args, &out, &errb)
	return code, out.String() + errb.String()
}
