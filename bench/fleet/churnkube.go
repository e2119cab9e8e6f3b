package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"
)

// The churn through Kubernetes (-via kube): the world's services are
// headless Services of the namespace kubeNS, each with one EndpointSlice
// of its 10 static endpoints (10,000 endpoints in 1,000 slices at
// -clusters 1000), on a real kube-apiserver the driver starts on loopback
// over Debian's etcd; a change is the update of its service's slice
// (written through the API as the endpoints' controller would), and
// Pylon's daemon watches them with --kubeconfig. Its services are then
// named kubeNS/service-NNNN.
const kubeNS = "bench"

// kubeAPI is the driver's kube-apiserver and its etcd.
type kubeAPI struct {
	dir, addr string
	procs     []*exec.Cmd
	client    *http.Client
	token     string
	// rv is each slice's last resourceVersion, for its next update.
	rv []string
	st *churnState
}

// kubeAPIServer is where -via kube finds kube-apiserver: as the tests do
// ($PYLON_KUBE_APISERVER, or .ci/kube-apiserver.sh's cache folder).
func kubeAPIServer() string {
	if p := os.Getenv("PYLON_KUBE_APISERVER"); p != "" {
		return p
	}
	cache := os.Getenv("PYLON_CACHE")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache", "pylon")
	}
	return filepath.Join(cache, "kube-apiserver-v1.37.2", "kube-apiserver")
}

// freePorts are n loopback ports free a moment ago.
func freePorts(n int) ([]string, error) {
	var out []string
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		out = append(out, l.Addr().String())
	}
	return out, nil
}

// startKubeAPI starts etcd and kube-apiserver in dir, on loopback, and
// waits until the apiserver is ready. The driver and Pylon both use one
// throwaway system:masters token (RBAC is the tests' business, not the
// benchmark's).
func startKubeAPI(dir string, clusters int) (*kubeAPI, error) {
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	k := &kubeAPI{dir: dir, addr: ports[2], token: "bench-admin-token", rv: make([]string, clusters), st: newChurnState(clusters)}
	if err := k.writeFiles(); err != nil {
		return nil, err
	}
	etcd := exec.Command("etcd", "--data-dir", filepath.Join(dir, "etcd"), "--listen-client-urls", "http://"+ports[0],
		"--advertise-client-urls", "http://"+ports[0], "--listen-peer-urls", "http://"+ports[1], "--log-level", "error")
	host, port, _ := net.SplitHostPort(ports[2])
	api := exec.Command(kubeAPIServer(), "--etcd-servers=http://"+ports[0], "--bind-address="+host, "--secure-port="+port,
		"--cert-dir="+filepath.Join(dir, "certs"), "--token-auth-file="+filepath.Join(dir, "tokens.csv"),
		"--authorization-mode=RBAC", "--anonymous-auth=false",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file="+filepath.Join(dir, "sa.key"), "--service-account-signing-key-file="+filepath.Join(dir, "sa.key"),
		"--service-cluster-ip-range=10.96.0.0/24", "--profiling=false", "--v=0")
	for _, c := range []*exec.Cmd{etcd, api} {
		log, err := os.Create(filepath.Join(dir, filepath.Base(c.Path)+".log"))
		if err != nil {
			k.stop()
			return nil, err
		}
		c.Stdout, c.Stderr = log, log
		c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := c.Start(); err != nil {
			log.Close()
			k.stop()
			return nil, fmt.Errorf("%s: %w", c.Path, err)
		}
		log.Close()
		k.procs = append(k.procs, c)
	}
	if err := k.waitReady(2 * time.Minute); err != nil {
		k.stop()
		return nil, err
	}
	return k, nil
}

// writeFiles writes the token file and the service-account key.
func (k *kubeAPI) writeFiles() error {
	tokens := fmt.Sprintf("%s,admin,1,\"system:masters\"\n", k.token)
	if err := os.WriteFile(filepath.Join(k.dir, "tokens.csv"), []byte(tokens), 0o600); err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(k.dir, "sa.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600)
}

// waitReady polls /readyz over the apiserver's self-signed certificate,
// then makes the client that trusts exactly it.
func (k *kubeAPI) waitReady(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for ; time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		ca, err := os.ReadFile(filepath.Join(k.dir, "certs", "apiserver.crt"))
		if err != nil {
			continue
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(ca)
		k.client = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: pool}, MaxIdleConnsPerHost: 16,
		}}
		if _, err := k.do(http.MethodGet, "/readyz", nil); err == nil {
			_, err = k.do(http.MethodGet, "/api/v1/namespaces/default", nil)
			if err == nil {
				return nil
			}
		}
	}
	return fmt.Errorf("kube-apiserver not ready within %v: see %s", limit, filepath.Join(k.dir, "kube-apiserver.log"))
}

func (k *kubeAPI) stop() {
	for _, p := range slices.Backward(k.procs) {
		_ = p.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = p.Process.Kill()
			<-done
		}
	}
}

// do sends body (JSON, or nil) and returns the answer, an error for
// anything but 2xx.
func (k *kubeAPI) do(method, path string, body any) ([]byte, error) {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, "https://"+k.addr+path, r)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+k.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := k.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	return b, nil
}

// kubeconfig writes Pylon's kubeconfig and returns its path.
func (k *kubeAPI) kubeconfig() (string, error) {
	ca, err := os.ReadFile(filepath.Join(k.dir, "certs", "apiserver.crt"))
	if err != nil {
		return "", err
	}
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: bench, cluster: {server: "https://%s", certificate-authority-data: %s}}]
users: [{name: admin, user: {token: %s}}]
contexts: [{name: bench, context: {cluster: bench, user: admin}}]
current-context: bench
`, k.addr, base64.StdEncoding.EncodeToString(ca), k.token)
	path := filepath.Join(k.dir, "kubeconfig")
	return path, os.WriteFile(path, []byte(cfg), 0o600)
}

// slicePath is service i's slice's path, "" for the collection.
func slicePath(i int) string {
	p := "/apis/discovery.k8s.io/v1/namespaces/" + kubeNS + "/endpointslices"
	if i < 0 {
		return p
	}
	return p + "/" + clusterName(i) + "-a"
}

// slice is service i's EndpointSlice with its 10 static endpoints and
// the registered ones of st, resourceVersion rv ("" to create).
func (k *kubeAPI) slice(i int, rv string) map[string]any {
	var eps []any
	add := func(addr string) {
		eps = append(eps, map[string]any{"addresses": []string{addr}, "conditions": map[string]bool{"ready": true}})
	}
	for j := range 10 {
		add(fmt.Sprintf("10.%d.%d.%d", i/256, i%256, j))
	}
	for _, r := range slices.Sorted(maps.Keys(k.st.regs[i])) {
		add(seqAddr(r))
	}
	meta := map[string]any{"name": clusterName(i) + "-a", "labels": map[string]string{"kubernetes.io/service-name": clusterName(i), "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io"}}
	if rv != "" {
		meta["resourceVersion"] = rv
	}
	return map[string]any{
		"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "metadata": meta, "addressType": "IPv4",
		"ports": []any{map[string]any{"port": 8080, "protocol": "TCP"}}, "endpoints": eps,
	}
}

// createWorld creates the namespace and, 8 at a time, each service's
// headless Service and slice.
func (k *kubeAPI) createWorld(clusters int) error {
	if _, err := k.do(http.MethodPost, "/api/v1/namespaces", map[string]any{"metadata": map[string]string{"name": kubeNS}}); err != nil {
		return err
	}
	jobs := make(chan int)
	errs := make(chan error, clusters)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range jobs {
				errs <- k.createService(i)
			}
		})
	}
	for i := range clusters {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func (k *kubeAPI) createService(i int) error {
	svc := map[string]any{
		"metadata": map[string]string{"name": clusterName(i)},
		"spec":     map[string]any{"clusterIP": "None", "ports": []any{map[string]any{"port": 80, "protocol": "TCP"}}},
	}
	if _, err := k.do(http.MethodPost, "/api/v1/namespaces/"+kubeNS+"/services", svc); err != nil {
		return err
	}
	return k.putSlice(http.MethodPost, i)
}

// putSlice creates (POST) or updates (PUT) service i's slice and keeps
// its new resourceVersion.
func (k *kubeAPI) putSlice(method string, i int) error {
	path := slicePath(-1)
	if method == http.MethodPut {
		path = slicePath(i)
	}
	b, err := k.do(method, path, k.slice(i, k.rv[i]))
	if err != nil {
		return err
	}
	var out struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return err
	}
	k.rv[i] = out.Metadata.ResourceVersion
	return nil
}

// upto applies the changes up to k: each changed service's slice is
// updated once, in order.
func (k *kubeAPI) upto(k1 int) error {
	changed := map[int]bool{}
	for _, c := range k.st.advance(k1) {
		changed[c.cluster] = true
	}
	for _, i := range slices.Sorted(maps.Keys(changed)) {
		if err := k.putSlice(http.MethodPut, i); err != nil {
			return err
		}
	}
	return nil
}

// kubeWorld starts the apiserver in dir/kube, creates the world there and
// writes Pylon's kubeconfig and its config file (the routes and the
// listener, naming the cluster's services) where the daemon child reads
// them.
func kubeWorld(dir string, clusters int) (*kubeAPI, error) {
	kdir := filepath.Join(dir, "kube")
	if err := os.MkdirAll(kdir, 0o700); err != nil {
		return nil, err
	}
	k, err := startKubeAPI(kdir, clusters)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	if err := k.createWorld(clusters); err != nil {
		k.stop()
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "kube: %d Services and EndpointSlices created in %v\n", clusters, time.Since(start).Round(time.Millisecond))
	kc, err := k.kubeconfig()
	if err == nil {
		err = os.Rename(kc, filepath.Join(dir, "kubeconfig"))
	}
	if err == nil {
		var doc []byte
		if doc, err = churnDocOf(clusters, nil, kubeNS); err == nil {
			err = os.WriteFile(filepath.Join(dir, "config.json"), doc, 0o600)
		}
	}
	if err != nil {
		k.stop()
		return nil, err
	}
	return k, nil
}
