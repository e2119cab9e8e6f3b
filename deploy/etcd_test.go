package deploy_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/pylon-xds/pylon/internal/certs"
	"github.com/pylon-xds/pylon/internal/cli"
)

// etcdBound is how long a member may take to serve, and one etcdctl call.
const etcdBound = 30 * time.Second

// TestShippedEtcdRefusesProxyCertificates runs the etcd StatefulSet's own
// flags on three etcd members on loopback (Debian's etcd-server; skipped
// without etcd and etcdctl, which .ci/run installs, and fails without
// them under CI=true), with the
// certificates docs/packaging.md makes, by its commands: the members
// form a cluster over peer TLS; a proxy's xDS certificate is refused at
// the client port and Pylon's etcd certificate at the peer port; after
// packaging.md's etcdctl recipe, Pylon's certificate reads and writes
// /pylon/ and nothing else; and it proves no xDS identity.
func TestShippedEtcdRefusesProxyCertificates(t *testing.T) {
	for _, bin := range []string{"etcd", "etcdctl"} {
		if _, err := exec.LookPath(bin); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s not installed, and CI=true: .ci/run installs etcd-server and etcd-client: %v", bin, err)
			}
			t.Skipf("%s not installed (apt-get install etcd-server etcd-client): %v", bin, err)
		}
	}
	m := loadManifests(t, manifestDir)
	if len(m.statefulSets) != 1 {
		t.Fatal("want one StatefulSet, etcd")
	}
	spec := m.statefulSets[0].Spec.Template.Spec
	pylonSpec := m.pylonWorkload(t).template.Spec
	doc, err := os.ReadFile("../docs/packaging.md")
	if err != nil {
		t.Fatal(err)
	}
	folders := docSecretFolders(t)
	// The files as the pods read them, where docs/packaging.md makes them.
	local := func(spec corev1.PodSpec, flag string) string {
		for _, c := range spec.Containers {
			if v, ok := containerArgs(c)[flag]; ok {
				secret, file := secretFile(spec, c, v)
				return filepath.Join(folders[[2]string{secret, file}], file)
			}
		}
		t.Fatalf("no container has --%s", flag)
		return ""
	}
	xdsCA := local(pylonSpec, "xds-client-ca")
	pylon := etcdctl{ca: local(pylonSpec, "etcd-ca"), cert: local(pylonSpec, "etcd-cert"), key: local(pylonSpec, "etcd-key")}
	// A proxy's certificate, as packaging.md says to issue one.
	proxy := etcdctl{ca: pylon.ca, cert: filepath.Join(filepath.Dir(xdsCA), "edge-1.pem"), key: filepath.Join(filepath.Dir(xdsCA), "edge-1-key.pem")}
	dir := t.TempDir()
	t.Chdir(dir)
	runDocCerts(t, string(doc), "certs issue --dir "+filepath.Dir(xdsCA)+" --node-id edge-1 --cluster edge")

	ports := loopbackPorts(t, 9)
	var endpoints []string
	for i := range 3 {
		endpoints = append(endpoints, "https://"+ports[3*i])
	}
	for i := range 3 {
		args := etcdMemberArgs(t, spec, folders, i, ports, filepath.Join(dir, fmt.Sprintf("etcd-%d", i)))
		startEtcd(t, args, filepath.Join(dir, fmt.Sprintf("etcd-%d.log", i)))
	}
	pylon.endpoints, proxy.endpoints = endpoints[0], endpoints[0]
	deadline := time.Now().Add(etcdBound)
	for pylon.run(t, "put", "/pylon/ready", "x") != nil {
		if time.Now().After(deadline) {
			t.Fatalf("the three members do not serve after %v: see %s/etcd-*.log", etcdBound, dir)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, ep := range endpoints[1:] {
		if err := (etcdctl{endpoints: ep, ca: pylon.ca, cert: pylon.cert, key: pylon.key}).run(t, "get", "/pylon/ready"); err != nil {
			t.Errorf("member %s: %v", ep, err)
		}
	}
	if err := proxy.run(t, "put", "/pylon/objects/evil", "x"); err == nil {
		t.Error("etcd accepted a proxy's xDS certificate: put /pylon/objects/evil succeeded")
	}
	checkPeerPort(t, ports[1], local(spec, "peer-trusted-ca-file"), local(spec, "peer-cert-file"), pylon.cert)
	runDocAuth(t, string(doc), endpoints[0])
	if err := pylon.run(t, "put", "/pylon/objects/x", "x"); err != nil {
		t.Errorf("with authentication on, Pylon's certificate cannot write /pylon/: %v", err)
	}
	for _, key := range []string{"/pylon-staging/x", "/other"} {
		if err := pylon.run(t, "put", key, "x"); err == nil {
			t.Errorf("with authentication on, Pylon's certificate writes %s", key)
		}
	}
	if err := proxy.run(t, "get", "/pylon/objects/x"); err == nil {
		t.Error("with authentication on, etcd accepted a proxy's xDS certificate")
	}
	if _, err := certs.VerifyClient([]*x509.Certificate{readCert(t, pylon.cert)}, pool(t, xdsCA), time.Now()); err == nil {
		t.Error("Pylon's etcd certificate verifies against the xDS client CA: it is an xDS identity")
	}
}

// runDocCerts runs docs/packaging.md's `pylon certs` commands of its
// Kubernetes section and then more, in process, in the current folder.
func runDocCerts(t *testing.T, doc string, more ...string) {
	t.Helper()
	k8s := doc[strings.Index(doc, "## Kubernetes"):]
	k8s = k8s[:strings.Index(k8s, "## systemd")]
	lines := regexp.MustCompile(`(?m)^pylon (certs .*)$`).FindAllStringSubmatch(k8s, -1)
	for _, m := range more {
		lines = append(lines, []string{"", m})
	}
	for _, l := range lines {
		var out bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), etcdBound)
		code := cli.Execute(ctx, strings.Fields(l[1]), &out, &out)
		cancel()
		if code != 0 {
			t.Fatalf("pylon %s: exit %d: %s", l[1], code, out.String())
		}
	}
}

// etcdMemberArgs are the StatefulSet's etcd arguments for member i, on
// loopback: the pod's name etcd-i, the members' names and ports as
// ports[3i:3i+3] (client, peer, metrics), the data under dataDir and each
// file a Secret holds as docs/packaging.md's folder holds it.
func etcdMemberArgs(t *testing.T, spec corev1.PodSpec, folders map[[2]string]string, i int, ports []string, dataDir string) []string {
	t.Helper()
	c := spec.Containers[0]
	pairs := []string{"$(POD_NAME)", fmt.Sprintf("etcd-%d", i)}
	for j := range 3 {
		for k, port := range []string{"2379", "2380", "2381"} {
			pairs = append(pairs, fmt.Sprintf("etcd-%d.etcd:%s", j, port), ports[3*j+k])
		}
	}
	for k, port := range []string{"2379", "2380", "2381"} {
		pairs = append(pairs, "0.0.0.0:"+port, ports[3*i+k])
	}
	var args []string
	for _, a := range append(c.Command[1:], c.Args...) {
		name, value, _ := strings.Cut(a, "=")
		value = strings.NewReplacer(pairs[:2]...).Replace(value)
		value = strings.NewReplacer(pairs[2:]...).Replace(value)
		switch secret, file := secretFile(spec, c, value); {
		case name == "--data-dir":
			value = dataDir
		case secret != "":
			folder, ok := folders[[2]string{secret, file}]
			if !ok {
				t.Fatalf("%s: docs/packaging.md puts no %s in Secret %s", a, file, secret)
			}
			value = filepath.Join(folder, file)
		}
		if value != "" || strings.Contains(a, "=") {
			a = name + "=" + value
		}
		args = append(args, a)
	}
	return args
}

// startEtcd starts a member, logging to logFile, and kills it when t ends.
func startEtcd(t *testing.T, args []string, logFile string) {
	t.Helper()
	log, err := os.Create(logFile)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("etcd", args...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		log.Close()
	})
}

// etcdctl runs etcdctl against endpoints with a client certificate.
type etcdctl struct{ endpoints, ca, cert, key string }

func (e etcdctl) run(t *testing.T, args ...string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), etcdBound)
	defer cancel()
	cmd := exec.CommandContext(ctx, "etcdctl", append([]string{"--dial-timeout=2s", "--command-timeout=5s"}, args...)...)
	cmd.Env = append(os.Environ(), "ETCDCTL_API=3", "ETCDCTL_ENDPOINTS="+e.endpoints, "ETCDCTL_CACERT="+e.ca, "ETCDCTL_CERT="+e.cert, "ETCDCTL_KEY="+e.key)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("etcdctl %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// runDocAuth runs the etcdctl recipe of docs/packaging.md (its export
// line's certificates, against endpoint instead of the port forward).
func runDocAuth(t *testing.T, doc, endpoint string) {
	t.Helper()
	export := regexp.MustCompile(`(?m)^export ETCDCTL_ENDPOINTS=\S+ ETCDCTL_CACERT=(\S+) ETCDCTL_CERT=(\S+) ETCDCTL_KEY=(\S+)$`).FindStringSubmatch(doc)
	if export == nil {
		t.Fatal("docs/packaging.md has no `export ETCDCTL_ENDPOINTS=... ETCDCTL_CACERT=... ETCDCTL_CERT=... ETCDCTL_KEY=...` line")
	}
	root := etcdctl{endpoints: endpoint, ca: export[1], cert: export[2], key: export[3]}
	lines := regexp.MustCompile(`(?m)^etcdctl (.*)$`).FindAllStringSubmatch(doc, -1)
	if len(lines) == 0 || lines[len(lines)-1][1] != "auth enable" {
		t.Fatalf("docs/packaging.md's etcdctl recipe does not end with auth enable: %v", lines)
	}
	for _, l := range lines {
		if err := root.run(t, strings.Fields(l[1])...); err != nil {
			t.Fatalf("docs/packaging.md: %v", err)
		}
	}
}

// checkPeerPort checks that the peer port at addr accepts the members'
// certificate and refuses Pylon's etcd client certificate, which the same
// CA issued.
func checkPeerPort(t *testing.T, addr, ca, member, client string) {
	t.Helper()
	for _, c := range []struct {
		name string
		ok   bool
	}{{member, true}, {client, false}} {
		pair, err := tls.LoadX509KeyPair(c.name, strings.TrimSuffix(c.name, ".pem")+"-key.pem")
		if err != nil {
			t.Fatal(err)
		}
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool(t, ca), Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}}
		client := &http.Client{Timeout: 10 * time.Second, Transport: tr}
		resp, err := client.Get("https://" + addr + "/members")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				err = fmt.Errorf("%s", resp.Status)
			}
		}
		tr.CloseIdleConnections()
		if c.ok && err != nil {
			t.Errorf("the peer port refuses the members' certificate: %v", err)
		}
		if !c.ok && err == nil {
			t.Errorf("the peer port accepts %s, a client's certificate", c.name)
		}
	}
}

func pool(t *testing.T, file string) *x509.CertPool {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	p := x509.NewCertPool()
	p.AppendCertsFromPEM(b)
	return p
}

func readCert(t *testing.T, file string) *x509.Certificate {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(file, strings.TrimSuffix(file, ".pem")+"-key.pem")
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// loopbackPorts returns n loopback addresses nothing listens on now, held
// together so none is handed out twice (etcd needs its URLs before it
// listens).
func loopbackPorts(t *testing.T, n int) []string {
	t.Helper()
	var out []string
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		out = append(out, l.Addr().String())
	}
	return out
}
