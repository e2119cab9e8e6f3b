package deploy_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/pylon-xds/pylon/internal/certs/certstest"
	"github.com/pylon-xds/pylon/internal/daemon"
	"github.com/pylon-xds/pylon/internal/daemon/daemontest"
)

const manifestDir = "kubernetes"

// manifests are the shipped Kubernetes objects, decoded.
type manifests struct {
	services     []*corev1.Service
	accounts     []*corev1.ServiceAccount
	deployments  []*appsv1.Deployment
	statefulSets []*appsv1.StatefulSet
	budgets      []*policyv1.PodDisruptionBudget
	policies     []*networkingv1.NetworkPolicy
	roles        []*rbacv1.ClusterRole
	bindings     []*rbacv1.ClusterRoleBinding
}

// workload is a Deployment's or StatefulSet's pods, for the checks they share.
type workload struct {
	where    string
	replicas int32
	template corev1.PodTemplateSpec
	claims   []string // a StatefulSet's volumeClaimTemplates, volumes too
}

// kinds are the objects the manifests may hold, by apiVersion and kind,
// each decoded into its API type. RBAC is not among them: Pylon never
// calls the Kubernetes API.
func (m *manifests) decode(where string, doc []byte) error {
	var tm struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return err
	}
	var obj any
	switch tm.APIVersion + " " + tm.Kind {
	case "v1 Service":
		o := &corev1.Service{}
		m.services, obj = append(m.services, o), o
	case "v1 ServiceAccount":
		o := &corev1.ServiceAccount{}
		m.accounts, obj = append(m.accounts, o), o
	case "apps/v1 Deployment":
		o := &appsv1.Deployment{}
		m.deployments, obj = append(m.deployments, o), o
	case "apps/v1 StatefulSet":
		o := &appsv1.StatefulSet{}
		m.statefulSets, obj = append(m.statefulSets, o), o
	case "policy/v1 PodDisruptionBudget":
		o := &policyv1.PodDisruptionBudget{}
		m.budgets, obj = append(m.budgets, o), o
	case "networking.k8s.io/v1 NetworkPolicy":
		o := &networkingv1.NetworkPolicy{}
		m.policies, obj = append(m.policies, o), o
	case "rbac.authorization.k8s.io/v1 ClusterRole":
		o := &rbacv1.ClusterRole{}
		m.roles, obj = append(m.roles, o), o
	case "rbac.authorization.k8s.io/v1 ClusterRoleBinding":
		o := &rbacv1.ClusterRoleBinding{}
		m.bindings, obj = append(m.bindings, o), o
	default:
		return fmt.Errorf("apiVersion %q kind %q: not an object these manifests should hold", tm.APIVersion, tm.Kind)
	}
	// Strict, as the API server's strict field validation: a field the API
	// type does not have (a typo, a field at the wrong level, a name in
	// the wrong case) or a key given twice fails. encoding/json alone
	// would match readOnlyRootFileSystem to readOnlyRootFilesystem.
	j, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return err
	}
	strict, err := sigsjson.UnmarshalStrict(j, obj)
	if err != nil {
		return err
	}
	return errors.Join(append(strict, checkNames(obj.(metav1.Object))...)...)
}

// checkNames checks what the API server would of an object's name and
// labels, with apimachinery's own validation.
func checkNames(o metav1.Object) []error {
	var errs []error
	for _, msg := range validation.IsDNS1123Label(o.GetName()) {
		errs = append(errs, fmt.Errorf("metadata.name %q: %s", o.GetName(), msg))
	}
	if o.GetNamespace() != "" {
		errs = append(errs, fmt.Errorf("%s: metadata.namespace %q: the manifests are applied into a namespace of the operator's choosing", o.GetName(), o.GetNamespace()))
	}
	for k, v := range o.GetLabels() {
		for _, msg := range append(validation.IsQualifiedName(k), validation.IsValidLabelValue(v)...) {
			errs = append(errs, fmt.Errorf("%s: label %s=%s: %s", o.GetName(), k, v, msg))
		}
	}
	return errs
}

// loadManifests decodes every document of every YAML file in dir.
func loadManifests(t *testing.T, dir string) *manifests {
	t.Helper()
	m := &manifests{}
	eachDocument(t, dir, func(f string, i int, doc []byte) {
		if err := m.decode(f, doc); err != nil {
			t.Errorf("%s: document %d: %v", f, i, err)
		}
	})
	return m
}

// eachDocument calls fn with every document (numbered from 1) of every
// YAML file in dir, leaving out those holding only comments.
func eachDocument(t *testing.T, dir string, fn func(file string, i int, doc []byte)) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in %s: %v", dir, err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1) {
			if strings.TrimSpace(regexp.MustCompile(`(?m)^\s*#.*$`).ReplaceAllString(doc, "")) == "" {
				continue
			}
			fn(f, i+1, []byte(doc))
		}
	}
}

func (m *manifests) workloads() []workload {
	var out []workload
	for _, d := range m.deployments {
		out = append(out, workload{"Deployment " + d.Name, ptrValue(d.Spec.Replicas, 1), d.Spec.Template, nil})
	}
	for _, s := range m.statefulSets {
		w := workload{"StatefulSet " + s.Name, ptrValue(s.Spec.Replicas, 1), s.Spec.Template, nil}
		for _, c := range s.Spec.VolumeClaimTemplates {
			w.claims = append(w.claims, c.Name)
		}
		out = append(out, w)
	}
	return out
}

func ptrValue[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

// selected returns the workloads whose pods sel (a label selector) picks.
func (m *manifests) selected(sel map[string]string) []workload {
	var out []workload
	for _, w := range m.workloads() {
		if len(sel) > 0 && labels.SelectorFromSet(sel).Matches(labels.Set(w.template.Labels)) {
			out = append(out, w)
		}
	}
	return out
}

// TestKubernetesManifests decodes every shipped object strictly into its
// Kubernetes API type and checks what the types cannot: Pylon's flags and
// files, its probes and ports, three replicas on a three-member etcd, the
// pods' security context, and that every Service, PodDisruptionBudget and
// NetworkPolicy selects pods and ports that exist.
func TestKubernetesManifests(t *testing.T) {
	m := loadManifests(t, manifestDir)
	if t.Failed() {
		t.FailNow()
	}
	for _, w := range m.workloads() {
		checkPodSecurity(t, w)
	}
	pylon := m.pylonWorkload(t)
	args := checkPylonContainer(t, pylon, serveFlags(t))
	checkEtcdEndpoints(t, m, args["etcd-endpoints"])
	checkSelectors(t, m)
	checkKubeSourceRBAC(t, m)
	for _, a := range m.accounts {
		if a.AutomountServiceAccountToken == nil || *a.AutomountServiceAccountToken {
			t.Errorf("ServiceAccount %s: automountServiceAccountToken must be false (nothing calls the Kubernetes API)", a.Name)
		}
	}
}

// pylonWorkload is the workload running the pylon container.
func (m *manifests) pylonWorkload(t *testing.T) workload {
	t.Helper()
	for _, w := range m.workloads() {
		for _, c := range w.template.Spec.Containers {
			if c.Name == "pylon" {
				if w.replicas != 3 {
					t.Errorf("%s: %d replicas, want 3", w.where, w.replicas)
				}
				return w
			}
		}
	}
	t.Fatal("no workload runs a container named pylon")
	return workload{}
}

// checkPodSecurity checks what every pod shipped must hold: non-root, no
// privilege escalation, a read-only root, no capabilities, no service
// account token, a memory limit, and mounts and probes naming what exists.
func checkPodSecurity(t *testing.T, w workload) {
	t.Helper()
	spec := w.template.Spec
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		t.Errorf("%s: automountServiceAccountToken must be false", w.where)
	}
	podNonRoot := spec.SecurityContext != nil && ptrValue(spec.SecurityContext.RunAsNonRoot, false)
	volumes := map[string]bool{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = true
	}
	for _, c := range w.claims {
		volumes[c] = true
	}
	for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
		where := w.where + " container " + c.Name
		sc := c.SecurityContext
		switch {
		case sc == nil:
			t.Errorf("%s: no securityContext", where)
			continue
		case !podNonRoot && !ptrValue(sc.RunAsNonRoot, false):
			t.Errorf("%s: runAsNonRoot is not true", where)
		case ptrValue(sc.AllowPrivilegeEscalation, true):
			t.Errorf("%s: allowPrivilegeEscalation must be false", where)
		case !ptrValue(sc.ReadOnlyRootFilesystem, false):
			t.Errorf("%s: readOnlyRootFilesystem must be true", where)
		case sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0:
			t.Errorf("%s: capabilities must drop ALL and add none", where)
		}
		for _, p := range c.Ports {
			for _, msg := range validation.IsValidPortName(p.Name) {
				t.Errorf("%s: port name %q: %s", where, p.Name, msg)
			}
		}
		if _, ok := c.Resources.Limits[corev1.ResourceMemory]; !ok {
			t.Errorf("%s: no memory limit", where)
		}
		for _, vm := range c.VolumeMounts {
			if !volumes[vm.Name] {
				t.Errorf("%s: volumeMount %s names no volume of the pod", where, vm.Name)
			}
		}
		for _, p := range []*corev1.Probe{c.ReadinessProbe, c.LivenessProbe, c.StartupProbe} {
			if p != nil && p.HTTPGet != nil && containerPort(c, p.HTTPGet.Port.String()) == 0 {
				t.Errorf("%s: a probe's port %s is none of the container's", where, p.HTTPGet.Port.String())
			}
		}
	}
}

// containerPort returns the number of c's port named or numbered port (0:
// none).
func containerPort(c corev1.Container, port string) int32 {
	for _, p := range c.Ports {
		if p.Name == port || strconv.Itoa(int(p.ContainerPort)) == port {
			return p.ContainerPort
		}
	}
	return 0
}

// fileFlags are serve's flags naming a file or folder the pod must mount
// (given a value: --xds-require-client-cert is a switch).
var fileFlags = regexp.MustCompile(`^(data-dir|.*-(cert|key|ca|token-file))$`)

// checkPylonContainer checks the pylon container's args against serve's
// flags, its files against its mounts, its ports against its addresses,
// its probes against the admin API's, and the grace period against the
// drain. It returns the flags' values.
func checkPylonContainer(t *testing.T, w workload, flags map[string]bool) map[string]string {
	t.Helper()
	c := w.template.Spec.Containers[slices.IndexFunc(w.template.Spec.Containers, func(c corev1.Container) bool { return c.Name == "pylon" })]
	where := w.where + " container pylon"
	if len(c.Command) > 0 {
		t.Errorf("%s: command %v replaces the image's entrypoint (pylon serve): give args only", where, c.Command)
	}
	checkServeArgs(t, where+" args", c.Args, flags)
	args := map[string]string{}
	for _, a := range c.Args {
		name, value, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		args[name] = value
	}
	for name, value := range args {
		if fileFlags.MatchString(name) && value != "" && !slices.ContainsFunc(c.VolumeMounts, func(vm corev1.VolumeMount) bool {
			return value == vm.MountPath || strings.HasPrefix(value, vm.MountPath+"/")
		}) {
			t.Errorf("%s: --%s=%s lies under no volumeMount", where, name, value)
		}
	}
	for flag, port := range map[string]string{"xds-addr": "xds", "admin-addr": "admin"} {
		_, p, err := net.SplitHostPort(args[flag])
		if err != nil || p != strconv.Itoa(int(containerPort(c, port))) {
			t.Errorf("%s: --%s=%s does not listen on the container port named %s (%d)", where, flag, args[flag], port, containerPort(c, port))
		}
	}
	scheme := corev1.URISchemeHTTP
	if args["admin-tls-cert"] != "" {
		scheme = corev1.URISchemeHTTPS
	}
	for kind, want := range map[string]struct {
		p    *corev1.Probe
		path string
	}{"readiness": {c.ReadinessProbe, "/readyz"}, "liveness": {c.LivenessProbe, "/healthz"}} {
		switch p := want.p; {
		case p == nil || p.HTTPGet == nil:
			t.Errorf("%s: no %s probe by HTTP GET", where, kind)
		case p.HTTPGet.Path != want.path || p.HTTPGet.Scheme != scheme || p.HTTPGet.Port.String() != "admin":
			t.Errorf("%s: %s probe %s %s on port %s, want %s %s on admin", where, kind, p.HTTPGet.Scheme, p.HTTPGet.Path, p.HTTPGet.Port.String(), scheme, want.path)
		}
	}
	drain, err1 := time.ParseDuration(args["drain-period"])
	grace, err2 := time.ParseDuration(args["shutdown-grace"])
	period := time.Duration(ptrValue(w.template.Spec.TerminationGracePeriodSeconds, 30)) * time.Second
	if err1 != nil || err2 != nil || period < drain+grace+time.Second {
		t.Errorf("%s: terminationGracePeriodSeconds %v must exceed --drain-period (%q) + --shutdown-grace (%q), both given", where, period, args["drain-period"], args["shutdown-grace"])
	}
	return args
}

// checkEtcdEndpoints checks that Pylon's --etcd-endpoints are the members
// of the shipped etcd StatefulSet, by their stable names, over TLS.
func checkEtcdEndpoints(t *testing.T, m *manifests, endpoints string) {
	t.Helper()
	if len(m.statefulSets) != 1 || ptrValue(m.statefulSets[0].Spec.Replicas, 1) != 3 {
		t.Fatalf("want one StatefulSet, etcd, of 3 members")
	}
	sts := m.statefulSets[0]
	var want []string
	for i := range 3 {
		want = append(want, fmt.Sprintf("https://%s-%d.%s:%d", sts.Name, i, sts.Spec.ServiceName, containerPort(sts.Spec.Template.Spec.Containers[0], "client")))
	}
	if got := strings.Split(endpoints, ","); !slices.Equal(got, want) {
		t.Errorf("pylon --etcd-endpoints %v, want the members %v", got, want)
	}
	headless := slices.ContainsFunc(m.services, func(s *corev1.Service) bool {
		return s.Name == sts.Spec.ServiceName && s.Spec.ClusterIP == corev1.ClusterIPNone
	})
	if !headless {
		t.Errorf("StatefulSet %s: serviceName %s is not a headless Service of the manifests", sts.Name, sts.Spec.ServiceName)
	}
}

// checkSelectors checks that every Service, PodDisruptionBudget and
// NetworkPolicy selects pods of the manifests, on ports those pods have.
func checkSelectors(t *testing.T, m *manifests) {
	t.Helper()
	hasPort := func(ws []workload, port string) bool {
		return slices.ContainsFunc(ws, func(w workload) bool {
			return slices.ContainsFunc(w.template.Spec.Containers, func(c corev1.Container) bool { return containerPort(c, port) != 0 })
		})
	}
	for _, s := range m.services {
		ws := m.selected(s.Spec.Selector)
		if len(ws) == 0 {
			t.Errorf("Service %s selects no pods of the manifests", s.Name)
		}
		for _, p := range s.Spec.Ports {
			if !hasPort(ws, p.TargetPort.String()) {
				t.Errorf("Service %s: targetPort %s is no port of the pods it selects", s.Name, p.TargetPort.String())
			}
		}
	}
	for _, b := range m.budgets {
		ws := m.selected(b.Spec.Selector.MatchLabels)
		if len(ws) != 1 || b.Spec.MaxUnavailable == nil || b.Spec.MaxUnavailable.IntValue() != 1 || ws[0].replicas < 3 {
			t.Errorf("PodDisruptionBudget %s: want maxUnavailable 1 over one workload of 3 replicas (selects %d)", b.Name, len(ws))
		}
	}
	for _, np := range m.policies {
		ws := m.selected(np.Spec.PodSelector.MatchLabels)
		if len(ws) == 0 {
			t.Errorf("NetworkPolicy %s selects no pods of the manifests", np.Name)
		}
		if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) || !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) {
			t.Errorf("NetworkPolicy %s: policyTypes %v: want Ingress and Egress", np.Name, np.Spec.PolicyTypes)
		}
		for _, r := range np.Spec.Ingress {
			for _, p := range r.Ports {
				if p.Port == nil || !hasPort(ws, p.Port.String()) {
					t.Errorf("NetworkPolicy %s: ingress port %v is no port of the pods it selects", np.Name, p.Port)
				}
			}
		}
	}
}

// TestKubernetesProbesAnswer runs a real Pylon with its admin API over TLS,
// as the manifest does, and asks each probe's path as the kubelet does
// (HTTPS, the certificate not verified, no token): each answers 200.
func TestKubernetesProbesAnswer(t *testing.T) {
	m := loadManifests(t, manifestDir)
	c := m.pylonWorkload(t).template.Spec.Containers[0]
	dir := t.TempDir()
	ca := certstest.NewCA(t, "probe test CA")
	files := ca.Issue(t, certstest.Server("pylon")).Write(t, ca, dir, "admin")
	d := daemontest.Start(t, daemon.Options{
		DataDir: filepath.Join(dir, "data"), XDSAddr: "127.0.0.1:0", AdminAddr: "127.0.0.1:0",
		AdminTLS: daemon.TLSFiles{Cert: files.Cert, Key: files.Key},
	})
	kubelet := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}, // as the kubelet probes
	}}
	defer kubelet.CloseIdleConnections()
	for _, p := range []*corev1.Probe{c.ReadinessProbe, c.LivenessProbe, c.StartupProbe} {
		if p == nil || p.HTTPGet == nil {
			continue
		}
		url := strings.ToLower(string(p.HTTPGet.Scheme)) + "://" + d.Admin + p.HTTPGet.Path
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := kubelet.Do(req)
		if err != nil {
			cancel()
			t.Fatalf("GET %s: %v", url, err)
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		cancel()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %d %s, want 200", url, resp.StatusCode, bytes.TrimSpace(body))
		}
	}
}

// TestKubernetesSecretsDocumented checks that docs/packaging.md creates
// every Secret the manifests mount, with every file the containers read
// from it.
func TestKubernetesSecretsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/packaging.md")
	if err != nil {
		t.Fatal(err)
	}
	created := map[string]string{} // secret -> its command line
	for _, m := range regexp.MustCompile(`(?m)^kubectl .*create secret generic (\S+)(.*)$`).FindAllStringSubmatch(string(doc), -1) {
		created[m[1]] = m[2]
	}
	for _, w := range loadManifests(t, manifestDir).workloads() {
		spec := w.template.Spec
		for _, v := range spec.Volumes {
			if v.Secret == nil {
				continue
			}
			line, ok := created[v.Secret.SecretName]
			if !ok {
				t.Errorf("%s: Secret %s: docs/packaging.md never creates it (kubectl create secret generic %s)", w.where, v.Secret.SecretName, v.Secret.SecretName)
				continue
			}
			for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
				for _, vm := range c.VolumeMounts {
					if vm.Name != v.Name {
						continue
					}
					for _, a := range append(slices.Clone(c.Command), c.Args...) {
						if _, value, ok := strings.Cut(a, "="); ok {
							a = value // a flag's file
						}
						file, ok := strings.CutPrefix(a, vm.MountPath+"/")
						if ok && !regexp.MustCompile(`--from-file=(\S*/)?`+regexp.QuoteMeta(file)+`\b`).MatchString(line) {
							t.Errorf("%s: %s reads %s from Secret %s, which docs/packaging.md does not put there", w.where, c.Name, file, v.Secret.SecretName)
						}
					}
				}
			}
		}
	}
}

// kubeSourceReads is all the Kubernetes source may do, by ClusterRole:
// read Services and EndpointSlices, and, in a role of its own applied only
// with --kube-node-localities, Nodes. The RBAC shipped grants nothing more.
var kubeSourceReads = map[string]map[string]bool{
	"pylon-kube-source": {"/services": true, "discovery.k8s.io/endpointslices": true},
	"pylon-kube-nodes":  {"/nodes": true},
}

// checkKubeSourceRBAC checks the only RBAC shipped, the Kubernetes
// source's: ClusterRoles that get, list and watch Services and
// EndpointSlices, or Nodes, and nothing else, bound only to the pylon
// ServiceAccount.
func checkKubeSourceRBAC(t *testing.T, m *manifests) {
	t.Helper()
	roles := map[string]bool{}
	for _, r := range m.roles {
		roles[r.Name] = true
		if kubeSourceReads[r.Name] == nil {
			t.Errorf("ClusterRole %s: not one of the Kubernetes source's roles", r.Name)
		}
		if r.AggregationRule != nil {
			t.Errorf("ClusterRole %s: aggregates other roles; it must list its rules", r.Name)
		}
		for i, rule := range r.Rules {
			for _, v := range rule.Verbs {
				if v != "get" && v != "list" && v != "watch" {
					t.Errorf("ClusterRole %s: rules[%d]: verb %q; the Kubernetes source only reads (get, list, watch)", r.Name, i, v)
				}
			}
			if len(rule.NonResourceURLs) > 0 || len(rule.ResourceNames) > 0 {
				t.Errorf("ClusterRole %s: rules[%d]: only resources, by type", r.Name, i)
			}
			for _, g := range rule.APIGroups {
				for _, res := range rule.Resources {
					if !kubeSourceReads[r.Name][g+"/"+res] {
						t.Errorf("ClusterRole %s: rules[%d]: %s in group %q; the Kubernetes source reads only services and discovery.k8s.io endpointslices, and nodes in pylon-kube-nodes alone", r.Name, i, res, g)
					}
				}
			}
		}
	}
	for _, b := range m.bindings {
		if b.RoleRef.Kind != "ClusterRole" || !roles[b.RoleRef.Name] {
			t.Errorf("ClusterRoleBinding %s: binds %s %s, not a ClusterRole of these manifests", b.Name, b.RoleRef.Kind, b.RoleRef.Name)
		}
		for _, s := range b.Subjects {
			if s.Kind != "ServiceAccount" || s.Name != "pylon" {
				t.Errorf("ClusterRoleBinding %s: binds %s %s; only the pylon ServiceAccount", b.Name, s.Kind, s.Name)
			}
		}
	}
}

// secretFile names the Secret and the file in it that a container reads
// at path, through the pod's volumeMounts ("" if no Secret holds it).
func secretFile(spec corev1.PodSpec, c corev1.Container, path string) (secret, file string) {
	for _, vm := range c.VolumeMounts {
		rest, ok := strings.CutPrefix(path, vm.MountPath+"/")
		if !ok {
			continue
		}
		for _, v := range spec.Volumes {
			if v.Name == vm.Name && v.Secret != nil {
				return v.Secret.SecretName, rest
			}
		}
	}
	return "", ""
}

// containerArgs is a container's --flag=value arguments by flag (a switch:
// "").
func containerArgs(c corev1.Container) map[string]string {
	args := map[string]string{}
	for _, a := range append(slices.Clone(c.Command[min(len(c.Command), 1):]), c.Args...) {
		name, value, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		args[name] = value
	}
	return args
}

// docSecretFolders reads docs/packaging.md's `kubectl create secret`
// lines: the folder each Secret's file comes from, by Secret and file.
func docSecretFolders(t *testing.T) map[[2]string]string {
	t.Helper()
	doc, err := os.ReadFile("../docs/packaging.md")
	if err != nil {
		t.Fatal(err)
	}
	out := map[[2]string]string{}
	for _, m := range regexp.MustCompile(`(?m)^kubectl .*create secret generic (\S+)(.*)$`).FindAllStringSubmatch(string(doc), -1) {
		for _, f := range regexp.MustCompile(`--from-file=(\S+)`).FindAllStringSubmatch(m[2], -1) {
			out[[2]string{m[1], filepath.Base(f[1])}] = filepath.Dir(f[1])
		}
	}
	return out
}

// TestKubernetesEtcdTrustsOnlyItsOwnCA checks that no proxy's xDS
// certificate is an etcd credential, and Pylon's etcd certificate no xDS
// identity: etcd trusts a CA of its own (docs/packaging.md makes it in
// another folder than the xDS CA, with another trust domain), for its
// clients and its peers; the peers speak TLS and accept only the members'
// certificate (its common name); Pylon verifies etcd by that CA and
// presents a certificate it issued.
func TestKubernetesEtcdTrustsOnlyItsOwnCA(t *testing.T) {
	m := loadManifests(t, manifestDir)
	if len(m.statefulSets) != 1 || len(m.statefulSets[0].Spec.Template.Spec.Containers) != 1 {
		t.Fatal("want one StatefulSet, etcd, of one container")
	}
	etcdSpec := m.statefulSets[0].Spec.Template.Spec
	etcd := containerArgs(etcdSpec.Containers[0])
	pylonSpec := m.pylonWorkload(t).template.Spec
	pylon := containerArgs(pylonSpec.Containers[slices.IndexFunc(pylonSpec.Containers, func(c corev1.Container) bool { return c.Name == "pylon" })])
	for _, flag := range []string{"client-cert-auth", "peer-client-cert-auth"} {
		if v, ok := etcd[flag]; !ok || (v != "" && v != "true") {
			t.Errorf("etcd: --%s is not on", flag)
		}
	}
	for _, flag := range []string{"listen-client-urls", "listen-peer-urls", "initial-advertise-peer-urls", "advertise-client-urls", "initial-cluster"} {
		for _, u := range strings.Split(etcd[flag], ",") {
			if _, url, named := strings.Cut(u, "="); named {
				u = url // initial-cluster's NAME=URL
			}
			if !strings.HasPrefix(u, "https://") {
				t.Errorf("etcd: --%s: %s is not over TLS", flag, u)
			}
		}
	}
	folders := docSecretFolders(t)
	folder := func(spec corev1.PodSpec, args map[string]string, flag string) string {
		secret, file := secretFile(spec, spec.Containers[slices.IndexFunc(spec.Containers, func(c corev1.Container) bool { return c.Name == "pylon" || c.Name == "etcd" })], args[flag])
		dir, ok := folders[[2]string{secret, file}]
		if secret == "" || !ok {
			t.Errorf("--%s=%s: no Secret file that docs/packaging.md creates (Secret %q, file %q)", flag, args[flag], secret, file)
		}
		return dir
	}
	etcdCA := folder(etcdSpec, etcd, "trusted-ca-file")
	xdsCA := folder(pylonSpec, pylon, "xds-client-ca")
	if etcdCA == xdsCA {
		t.Errorf("etcd's --trusted-ca-file and Pylon's --xds-client-ca are both %s/ca.pem: every proxy's certificate is an etcd client's, and Pylon's etcd certificate an xDS identity", xdsCA)
	}
	for _, c := range []struct {
		spec       corev1.PodSpec
		args       map[string]string
		flag, want string
	}{
		{etcdSpec, etcd, "peer-trusted-ca-file", etcdCA},
		{etcdSpec, etcd, "cert-file", etcdCA},
		{etcdSpec, etcd, "peer-cert-file", etcdCA},
		{pylonSpec, pylon, "etcd-ca", etcdCA},
		{pylonSpec, pylon, "etcd-cert", etcdCA},
	} {
		if got := folder(c.spec, c.args, c.flag); got != c.want {
			t.Errorf("--%s=%s comes from docs/packaging.md's folder %s, want etcd's CA's, %s", c.flag, c.args[c.flag], got, c.want)
		}
	}
	checkEtcdIssued(t, etcdCA, xdsCA, etcd, pylon)
}

// checkEtcdIssued checks docs/packaging.md's `pylon certs` commands: the
// etcd CA's trust domain is not Pylon's, the members' certificate is a
// peer's (server and client auth) whose common name, its first --dns, is
// the one etcd's peers accept, and it names every member as peers dial it.
func checkEtcdIssued(t *testing.T, etcdCA, xdsCA string, etcd, pylon map[string]string) {
	t.Helper()
	doc, err := os.ReadFile("../docs/packaging.md")
	if err != nil {
		t.Fatal(err)
	}
	trustDomain := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^pylon certs init --dir (\S+) --trust-domain (\S+)$`).FindAllStringSubmatch(string(doc), -1) {
		trustDomain[m[1]] = m[2]
	}
	if trustDomain[xdsCA] != pylon["trust-domain"] || trustDomain[etcdCA] == "" || trustDomain[etcdCA] == pylon["trust-domain"] {
		t.Errorf("docs/packaging.md: the CAs' trust domains %v: want %s's Pylon's (%s) and %s's another", trustDomain, xdsCA, pylon["trust-domain"], etcdCA)
	}
	cert := strings.TrimSuffix(filepath.Base(etcd["peer-cert-file"]), ".pem")
	issue := regexp.MustCompile(`(?m)^pylon certs issue --server --peer --dir ` + regexp.QuoteMeta(etcdCA) + ` --name ` + regexp.QuoteMeta(cert) + ` (.*)$`).FindStringSubmatch(string(doc))
	if issue == nil {
		t.Fatalf("docs/packaging.md issues no %s/%s.pem with --server --peer", etcdCA, cert)
	}
	var names []string
	for _, d := range regexp.MustCompile(`--dns (\S+)`).FindAllStringSubmatch(issue[1], -1) {
		names = append(names, d[1])
	}
	if len(names) == 0 || etcd["peer-cert-allowed-cn"] != names[0] {
		t.Errorf("etcd --peer-cert-allowed-cn=%s: want the members' certificate's common name, its first --dns (%v)", etcd["peer-cert-allowed-cn"], names)
	}
	for _, member := range strings.Split(etcd["initial-cluster"], ",") {
		_, u, _ := strings.Cut(member, "=")
		host, _, _ := strings.Cut(strings.TrimPrefix(u, "https://"), ":")
		if !slices.Contains(names, host) {
			t.Errorf("etcd member %s: %s is not among the --dns names of %s.pem (%v)", member, host, cert, names)
		}
	}
}
