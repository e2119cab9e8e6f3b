package deploy_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/pylon-xds/pylon/internal/source/kube/kubetest"
)

// manifestNamespace is where the namespaced objects are sent, as an
// operator applies them into a namespace of their choosing.
const manifestNamespace = "pylon"

// dryRunTimeout bounds one object's dry-run create.
const dryRunTimeout = 30 * time.Second

// refusal is the apiserver's answer to one object it would not create.
type refusal struct {
	file, object, msg string
}

func (r refusal) String() string { return fmt.Sprintf("%s: %s: %s", r.file, r.object, r.msg) }

// apiServer is an admin client of a real kube-apiserver and its API's
// kinds, for sending manifests to it.
type apiServer struct {
	client *kubernetes.Clientset
	mapper meta.RESTMapper
}

// startAPIServer starts kubetest's kube-apiserver (skipping without it,
// failing under CI=true) and creates manifestNamespace in it.
func startAPIServer(t *testing.T) *apiServer {
	t.Helper()
	s := kubetest.Start(t)
	c := s.Clientset(kubetest.Admin)
	groups, err := restmapper.GetAPIGroupResources(c.Discovery())
	if err != nil {
		t.Fatalf("kube-apiserver discovery: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), dryRunTimeout)
	defer cancel()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: manifestNamespace}}
	if _, err := c.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating namespace %s: %v", manifestNamespace, err)
	}
	return &apiServer{client: c, mapper: restmapper.NewDiscoveryRESTMapper(groups)}
}

// dryRunDir sends every object of every YAML file in dir to the apiserver
// as a server-side dry-run create with strict field validation, the YAML
// as written (so the apiserver's own decoder sees unknown and duplicate
// fields), and returns each refusal and how many objects it sent. A
// document the test cannot even address (no apiVersion or kind, a kind
// the apiserver does not serve) is a refusal too.
func (a *apiServer) dryRunDir(t *testing.T, dir string) (refused []refusal, sent int) {
	t.Helper()
	eachDocument(t, dir, func(f string, i int, doc []byte) {
		sent++
		object, err := a.dryRun(doc)
		if object == "" {
			object = fmt.Sprintf("document %d", i)
		}
		if err != nil {
			refused = append(refused, refusal{f, object, err.Error()})
		}
	})
	return refused, sent
}

// dryRun sends one document and names its object ("Kind name").
func (a *apiServer) dryRun(doc []byte) (object string, err error) {
	var tm struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return "", fmt.Errorf("not YAML the test can read: %w", err)
	}
	object = tm.Kind + " " + tm.Metadata.Name
	gv, err := schema.ParseGroupVersion(tm.APIVersion)
	if err != nil || tm.Kind == "" {
		return object, fmt.Errorf("apiVersion %q kind %q: %v", tm.APIVersion, tm.Kind, err)
	}
	m, err := a.mapper.RESTMapping(schema.GroupKind{Group: gv.Group, Kind: tm.Kind}, gv.Version)
	if err != nil {
		return object, fmt.Errorf("the apiserver serves no such kind: %w", err)
	}
	path := "/apis/" + gv.String()
	if gv.Group == "" {
		path = "/api/" + gv.Version
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		path += "/namespaces/" + manifestNamespace
	}
	ctx, cancel := context.WithTimeout(context.Background(), dryRunTimeout)
	defer cancel()
	err = a.client.Discovery().RESTClient().Post().AbsPath(path, m.Resource.Resource).
		Param("dryRun", metav1.DryRunAll).Param("fieldValidation", metav1.FieldValidationStrict).
		SetHeader("Content-Type", "application/yaml").Body(doc).
		Do(ctx).Error()
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return object, apiMessage(status.Status())
	}
	return object, err
}

// apiMessage is a refusal's message with each cause's field, as the
// apiserver gives them.
func apiMessage(s metav1.Status) error {
	msg := fmt.Sprintf("%s (%d %s)", s.Message, s.Code, s.Reason)
	if s.Details != nil {
		for _, c := range s.Details.Causes {
			if c.Field != "" && !strings.Contains(s.Message, c.Field) {
				msg += fmt.Sprintf("; %s: %s", c.Field, c.Message)
			}
		}
	}
	return errors.New(msg)
}

// TestKubernetesManifestsPassTheAPIServer sends every object of every
// shipped manifest, the cluster-scoped RBAC too, to a real kube-apiserver
// as a server-side dry-run create with strict field validation: its
// OpenAPI schemas, its decoder and its semantic validation (ports, names,
// selectors matching templates) judge them, and any refusal fails naming
// the file, the object and the apiserver's message. Then it shows that the
// same check fails: a copy of the manifests with one broken object added
// is refused, naming the field. One apiserver serves both, as its start
// is the test's cost; a dry-run changes nothing the next one sees.
func TestKubernetesManifestsPassTheAPIServer(t *testing.T) {
	a := startAPIServer(t)
	t.Run("shipped", func(t *testing.T) {
		refused, sent := a.dryRunDir(t, manifestDir)
		for _, r := range refused {
			t.Errorf("kube-apiserver refuses %s", r)
		}
		if want := loadManifests(t, manifestDir).count(); sent != want {
			t.Errorf("sent %d objects to the apiserver, want every one of the %d shipped", sent, want)
		}
	})
	for _, c := range brokenManifests {
		t.Run("refused/"+c.name, func(t *testing.T) {
			dir := copyManifests(t)
			file := filepath.Join(dir, "broken.yaml")
			if err := os.WriteFile(file, []byte(c.doc), 0o600); err != nil {
				t.Fatal(err)
			}
			got, _ := a.dryRunDir(t, dir)
			if len(got) != 1 || got[0].file != file || got[0].object != c.object || !strings.Contains(got[0].msg, c.field) {
				t.Fatalf("refusals %v: want one, of %s in %s, naming %q", got, c.object, file, c.field)
			}
			t.Logf("refused, as it should be: %s", got[0])
		})
	}
}

// copyManifests copies the shipped manifests into a new folder.
func copyManifests(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	files, err := filepath.Glob(filepath.Join(manifestDir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in %s: %v", manifestDir, err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// brokenManifests are objects the apiserver must refuse, each with the
// field its refusal must name: its schema's (an unknown or twice-given
// field, a wrong type) and its semantic validation's (a port out of
// range, a name it cannot hold, a selector its template does not match, a
// rule with no verbs).
var brokenManifests = []struct {
	name, object, field, doc string
}{
	{"unknown field", "Service broken", `spec.ports[0].prot`, `
apiVersion: v1
kind: Service
metadata:
  name: broken
spec:
  ports:
    - port: 80
      prot: TCP
`},
	{"field given twice", "Service broken", `key "port" already set`, `
apiVersion: v1
kind: Service
metadata:
  name: broken
spec:
  ports:
    - port: 80
      port: 81
`},
	{"port out of range", "Service broken", `spec.ports[0].port`, `
apiVersion: v1
kind: Service
metadata:
  name: broken
spec:
  ports:
    - port: 70000
`},
	{"wrong type", "Deployment broken", `containerPort`, `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: broken
spec:
  selector:
    matchLabels: {app: broken}
  template:
    metadata:
      labels: {app: broken}
    spec:
      containers:
        - name: c
          image: example.invalid/c
          ports:
            - containerPort: xds
`},
	{"selector not matching template", "Deployment broken", `spec.template.metadata.labels`, `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: broken
spec:
  selector:
    matchLabels: {app: broken}
  template:
    metadata:
      labels: {app: other}
    spec:
      containers:
        - name: c
          image: example.invalid/c
`},
	{"invalid name", "ServiceAccount Broken_Name", `metadata.name`, `
apiVersion: v1
kind: ServiceAccount
metadata:
  name: Broken_Name
`},
	{"cluster-scoped rule without verbs", "ClusterRole broken", `rules[0].verbs`, `
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: broken
rules:
  - apiGroups: [""]
    resources: [services]
`},
}

// count is how many objects the manifests hold.
func (m *manifests) count() int {
	return len(m.services) + len(m.accounts) + len(m.deployments) + len(m.statefulSets) +
		len(m.budgets) + len(m.policies) + len(m.roles) + len(m.bindings)
}
