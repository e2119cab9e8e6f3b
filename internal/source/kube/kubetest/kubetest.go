// Package kubetest starts a real kube-apiserver on loopback, on an embedded
// etcd (etcdtest), for the tests of the Kubernetes source: objects are
// created through the real API, and the source watches them through the
// real watch protocol, RBAC included. The binary is built once by
// .ci/kube-apiserver.sh into a cache folder; where it is absent a test
// skips, saying how to build it, and fails when CI=true. It is for tests
// only; nothing outside _test files imports it.
package kubetest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	"github.com/pylon-xds/pylon/internal/store/etcd/etcdtest"
)

// Version is the kube-apiserver the tests run, as .ci/kube-apiserver.sh
// builds it.
const Version = "v1.37.2"

// readyTimeout bounds the apiserver's start (its post-start hooks, the
// RBAC bootstrap policy, the default namespace) on a loaded 2-core machine.
const readyTimeout = 90 * time.Second

// stopTimeout bounds a graceful stop before the process is killed.
const stopTimeout = 20 * time.Second

// Users the apiserver knows, by bearer token (--token-auth-file). Admin is
// in system:masters; Pylon is in no group, so it may do only what an RBAC
// binding grants it (the tests bind the shipped ClusterRole).
const (
	Admin = "admin"
	Pylon = "pylon"
)

// Server is a kube-apiserver process on loopback.
type Server struct {
	t    testing.TB
	dir  string
	addr string // 127.0.0.1:port
	// bin and etcd are what Restart launches again.
	bin, etcd string
	cmd       *exec.Cmd
	log       string
	// exited is closed when the process has exited.
	exited chan struct{}
}

// Binary is where the tests find kube-apiserver: $PYLON_KUBE_APISERVER, or
// the cache folder .ci/kube-apiserver.sh builds into.
func Binary() string {
	if p := os.Getenv("PYLON_KUBE_APISERVER"); p != "" {
		return p
	}
	cache := os.Getenv("PYLON_CACHE")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache", "pylon")
	}
	return filepath.Join(cache, "kube-apiserver-"+Version, "kube-apiserver")
}

// Start starts kube-apiserver on a new embedded etcd, waits until /readyz
// answers and the default namespace exists, and stops both when t ends.
// Without the binary the test is skipped (failed with CI=true).
func Start(t testing.TB) *Server {
	t.Helper()
	bin := Binary()
	if st, err := os.Stat(bin); err != nil || st.IsDir() {
		msg := fmt.Sprintf("no kube-apiserver at %s: build it once with `bash .ci/kube-apiserver.sh` (about 11 minutes) or set PYLON_KUBE_APISERVER", bin)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	etcd := etcdtest.Start(t)
	s := &Server{t: t, dir: t.TempDir(), addr: etcdtest.FreePorts(t, 1)[0], bin: bin, etcd: etcd.Endpoint(), exited: make(chan struct{})}
	s.writeFiles()
	s.launch()
	t.Cleanup(s.Stop)
	s.waitReady()
	return s
}

// writeFiles writes the token file and the service-account key.
func (s *Server) writeFiles() {
	s.t.Helper()
	tokens := fmt.Sprintf("%s,%s,1,\"system:masters\"\n%s,%s,2\n", token(Admin), Admin, token(Pylon), Pylon)
	if err := os.WriteFile(filepath.Join(s.dir, "tokens.csv"), []byte(tokens), 0o600); err != nil {
		s.t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		s.t.Fatal(err)
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		s.t.Fatal(err)
	}
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
	if err := os.WriteFile(filepath.Join(s.dir, "sa.key"), pemKey, 0o600); err != nil {
		s.t.Fatal(err)
	}
}

// token is a user's bearer token: these are throwaway test credentials of
// an apiserver that lives for one test, on loopback.
func token(user string) string { return "kubetest-" + user + "-token" }

// launch starts the process. Its output goes to a file (read on failure),
// so no goroutine copies it; it is killed if the test binary dies first.
func (s *Server) launch() {
	s.t.Helper()
	bin, etcdEndpoint := s.bin, s.etcd
	host, port, _ := strings.Cut(s.addr, ":")
	args := []string{
		"--etcd-servers=http://" + etcdEndpoint,
		"--bind-address=" + host, "--secure-port=" + port,
		// A self-signed serving certificate for 127.0.0.1, made by the
		// apiserver itself; clients trust exactly it.
		"--cert-dir=" + filepath.Join(s.dir, "certs"),
		"--token-auth-file=" + filepath.Join(s.dir, "tokens.csv"),
		"--authorization-mode=Node,RBAC",
		"--anonymous-auth=false",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + filepath.Join(s.dir, "sa.key"),
		"--service-account-signing-key-file=" + filepath.Join(s.dir, "sa.key"),
		// Cluster IPs are allocated from here: data only, nothing routes.
		"--service-cluster-ip-range=10.96.0.0/24",
		"--profiling=false",
		"--v=1",
	}
	s.log = filepath.Join(s.dir, "kube-apiserver.log")
	out, err := os.OpenFile(s.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		s.t.Fatal(err)
	}
	defer out.Close()
	s.cmd = exec.Command(bin, args...)
	s.cmd.Stdout, s.cmd.Stderr = out, out
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("starting kube-apiserver: %v", err)
	}
	cmd, exited := s.cmd, s.exited
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
}

// Restart starts a stopped apiserver again on the same address, etcd
// and serving certificate: its objects are as they were, and kubeconfigs
// written before still reach it. It waits until it is ready.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	s.exited = make(chan struct{})
	s.launch()
	s.waitReady()
}

// Stop ends the process, gracefully first, and waits for it: the API is
// away from then on. A no-op once stopped.
func (s *Server) Stop() {
	select {
	case <-s.exited:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(stopTimeout):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
}

// waitReady polls /readyz, then waits for the default namespace, within
// readyTimeout, failing with the end of the apiserver's log.
func (s *Server) waitReady() {
	s.t.Helper()
	deadline := time.Now().Add(readyTimeout)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		if s.ready() {
			break
		}
		select {
		case <-s.exited:
			s.t.Fatalf("kube-apiserver exited before it was ready:\n%s", s.logTail())
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("kube-apiserver not ready within %v:\n%s", readyTimeout, s.logTail())
		}
	}
	c := s.Clientset(Admin)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := c.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{})
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("kube-apiserver: no default namespace within %v: %v", readyTimeout, err)
		}
		<-tick.C
	}
}

// ready reports whether /readyz answers 200 over the apiserver's own
// certificate.
func (s *Server) ready() bool {
	ca, err := os.ReadFile(s.caFile())
	if err != nil {
		return false
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return false
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequest(http.MethodGet, "https://"+s.addr+"/readyz", nil)
	if err != nil {
		return false
	}
	req.Header.Set("Authorization", "Bearer "+token(Admin))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	resp, err := (&http.Client{Transport: tr}).Do(req.WithContext(ctx))
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// caFile is the apiserver's self-signed serving certificate.
func (s *Server) caFile() string { return filepath.Join(s.dir, "certs", "apiserver.crt") }

// logTail is the end of the apiserver's log, for failures.
func (s *Server) logTail() string {
	b, _ := os.ReadFile(s.log)
	const keep = 4000
	if len(b) > keep {
		b = b[len(b)-keep:]
	}
	return string(b)
}

// Kubeconfig writes a kubeconfig file for user (Admin or Pylon) in the
// test's folder and returns its path.
func (s *Server) Kubeconfig(user string) string {
	s.t.Helper()
	ca, err := os.ReadFile(s.caFile())
	if err != nil {
		s.t.Fatal(err)
	}
	cfg := clientcmdapiConfig(s.addr, user, ca, token(user))
	path := filepath.Join(s.dir, user+".kubeconfig")
	if err := clientcmd.WriteToFile(cfg, path); err != nil {
		s.t.Fatal(err)
	}
	return path
}

// Clientset is a client of the apiserver as user.
func (s *Server) Clientset(user string) *kubernetes.Clientset {
	s.t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", s.Kubeconfig(user))
	if err != nil {
		s.t.Fatal(err)
	}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		s.t.Fatal(err)
	}
	return c
}

// clientcmdapiConfig is a kubeconfig with one cluster, user and context.
func clientcmdapiConfig(addr, user string, ca []byte, bearer string) clientcmdapi.Config {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["kubetest"] = &clientcmdapi.Cluster{Server: "https://" + addr, CertificateAuthorityData: ca}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: bearer}
	cfg.Contexts["kubetest"] = &clientcmdapi.Context{Cluster: "kubetest", AuthInfo: user}
	cfg.CurrentContext = "kubetest"
	return *cfg
}

// Grant creates, as Admin, the ClusterRoles of the manifest at path (the
// shipped deploy/kubernetes/pylon-kube-source-rbac.yaml) and binds each to
// user: the user may then do what the shipped RBAC allows, and no more.
// Other objects in the file are ignored.
func (s *Server) Grant(path, user string) {
	s.t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		s.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rbac := s.Clientset(Admin).RbacV1()
	for _, doc := range strings.Split(string(b), "\n---\n") {
		var role rbacv1.ClusterRole
		if err := yaml.UnmarshalStrict([]byte(doc), &role); err != nil || role.Kind != "ClusterRole" {
			continue
		}
		if _, err := rbac.ClusterRoles().Create(ctx, &role, metav1.CreateOptions{}); err != nil {
			s.t.Fatalf("creating ClusterRole %s: %v", role.Name, err)
		}
		binding := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: role.Name + "-" + user},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
		}
		if _, err := rbac.ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
			s.t.Fatalf("binding ClusterRole %s to %s: %v", role.Name, user, err)
		}
	}
}
