package pipeline

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/secretfile"
	"github.com/pylon-xds/pylon/internal/source"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

func golden(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("../compile/testdata/compile/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func newUpdate(path string, data []byte) source.Update {
	return source.Update{Files: []config.File{{Path: path, Data: data}}, AcceptedAt: time.Now()}
}

// A refused change leaves the last good snapshot serving, is reported with
// its diagnostics, and is logged once however often it is re-read.
func TestRefusedChangeKeepsLastGood(t *testing.T) {
	var logs bytes.Buffer
	pub := fleet.NewPublisher()
	p := New(Options{Registry: xdstype.New(), Publish: PublishTo(pub), Logger: slog.New(slog.NewTextHandler(&logs, nil))})

	if err := p.Apply(newUpdate("pylon.yaml", golden(t, "valid_full.yaml"))); err != nil {
		t.Fatal(err)
	}
	good := pub.Current()
	st := p.Status()
	if st.Version != good.Version() || len(st.Groups) != 1 || st.Groups[0].Resources["Cluster"] != 3 || st.Refused != nil {
		t.Fatalf("status after a good config: %+v", st)
	}

	bad := newUpdate("pylon.yaml", golden(t, "dangling_refs.yaml"))
	for range 3 { // a resync re-reads the same bad bytes
		err := p.Apply(bad)
		if err == nil || !strings.Contains(err.Error(), "missing-cluster") {
			t.Fatalf("bad config: err %v", err)
		}
	}
	if pub.Current() != good {
		t.Fatal("a refused config replaced the last good one")
	}
	st = p.Status()
	if st.Version != good.Version() || st.Refused == nil || len(st.Refused.Diagnostics) != 6 {
		t.Fatalf("status after a refusal: %+v", st)
	}
	d := st.Refused.Diagnostics[0]
	if d.File != "pylon.yaml" || d.Type != "Listener" || d.Name != "front" || d.Field == "" || d.Line == 0 {
		t.Fatalf("diagnostic does not locate the problem: %+v", d)
	}
	if n := strings.Count(logs.String(), "config refused"); n != 1 {
		t.Fatalf("refusal logged %d times, want once:\n%s", n, logs.String())
	}

	// A read error is refused the same way.
	if err := p.Apply(source.Update{Err: errors.New("open pylon.yaml: no such file"), AcceptedAt: time.Now()}); err == nil {
		t.Fatal("read error accepted")
	}
	if pub.Current() != good {
		t.Fatal("a read error replaced the last good config")
	}

	// Fixing it clears the refusal; identical content publishes nothing new.
	if err := p.Apply(newUpdate("pylon.yaml", golden(t, "valid_full.yaml"))); err != nil {
		t.Fatal(err)
	}
	if pub.Current() != good || p.Status().Refused != nil {
		t.Fatal("re-applying the good config should clear the refusal and keep the same fleet")
	}
}

// Bytes of a file that differ but decode to the same resources (comments,
// key order, YAML vs JSON) publish nothing: versions are of content.
func TestEquivalentInputPublishesNothing(t *testing.T) {
	pub := fleet.NewPublisher()
	p := New(Options{Registry: xdstype.New(), Publish: PublishTo(pub)})
	ch, cancel := pub.Subscribe()
	defer cancel()
	yaml := "resources:\n- {\"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster, name: a, type: STATIC, connect_timeout: 1s}\n"
	json := `{"resources": [{"connectTimeout": "1s", "type": "STATIC", "name": "a", "@type": "type.googleapis.com/envoy.config.cluster.v3.Cluster"}]}`
	if err := p.Apply(newUpdate("a.yaml", []byte(yaml))); err != nil {
		t.Fatal(err)
	}
	<-ch
	if err := p.Apply(newUpdate("a.json", []byte(json))); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
		t.Fatal("equivalent content was published again")
	default:
	}
}

func TestOversizedFileRefused(t *testing.T) {
	big := make([]byte, config.MaxFileBytes+1)
	p := New(Options{Registry: xdstype.New(), Publish: PublishTo(fleet.NewPublisher())})
	err := p.Apply(newUpdate("huge.yaml", big))
	if err == nil || !strings.Contains(err.Error(), "huge.yaml") || !strings.Contains(err.Error(), "limit") {
		t.Fatalf("oversized file: %v", err)
	}
}

// Options.Read confines what the pipeline reads: a secret file outside the
// secret directories is refused, naming the field, and nothing publishes.
func TestReadConfinesSecretFiles(t *testing.T) {
	certs := t.TempDir()
	r, err := secretfile.New([]string{certs}, nil)
	if err != nil {
		t.Fatal(err)
	}
	pub := fleet.NewPublisher()
	p := New(Options{Registry: xdstype.New(), Publish: PublishTo(pub), Read: r.Read})
	doc := "secrets:\n- { name: stolen, ca_file: /etc/hostname }\n"
	err = p.Apply(newUpdate("pylon.yaml", []byte(doc)))
	if err == nil || !strings.Contains(err.Error(), `secret "stolen": ca_file: /etc/hostname is outside the secret directories`) {
		t.Fatalf("unconfined read: %v", err)
	}
	if pub.Current() != nil {
		t.Fatal("a refused config was published")
	}
}

// An error that is not a diagnostic list (a source's read error) may quote
// a key file: neither the status nor the log line shows the key, and a
// resync that repeats it is still logged once.
func TestNonDiagnosticRefusalScrubbed(t *testing.T) {
	var logs bytes.Buffer
	p := New(Options{Registry: xdstype.New(), Publish: PublishTo(fleet.NewPublisher()), Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	const key = "-----BEGIN PRIVATE KEY-----\nSEKRITBYTES\n-----END PRIVATE KEY-----\n"
	bad := source.Update{Err: errors.New("reading tls.key: unexpected content " + key), AcceptedAt: time.Now()}
	for range 2 {
		if err := p.Apply(bad); err == nil {
			t.Fatal("read error accepted")
		}
	}
	st := p.Status()
	if st.Refused == nil || strings.Contains(st.Refused.Error, "SEKRITBYTES") || !strings.Contains(st.Refused.Error, "tls.key") {
		t.Fatalf("refusal not scrubbed: %+v", st.Refused)
	}
	if strings.Contains(logs.String(), "SEKRITBYTES") {
		t.Fatalf("the log shows the key:\n%s", logs.String())
	}
	if n := strings.Count(logs.String(), "config refused"); n != 1 {
		t.Fatalf("refusal logged %d times, want once:\n%s", n, logs.String())
	}
}

// A config that routes to a service with no endpoints is published, and
// the status carries the warning (file, line, route table, field) and the
// log says it once; registering an endpoint clears it.
func TestWarningsReachStatusAndLog(t *testing.T) {
	var logs bytes.Buffer
	pub := fleet.NewPublisher()
	p := New(Options{Registry: xdstype.New(), Publish: PublishTo(pub), Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	doc := `services:
- name: waiting
listeners:
- { name: http, port: 10000, routes: all }
routes:
- name: all
  virtual_hosts:
  - { name: any, domains: ["*"], routes: [{ to: [{ service: waiting }] }] }
`
	if err := p.Apply(newUpdate("pylon.yaml", []byte(doc))); err != nil {
		t.Fatalf("refused: %v", err)
	}
	st := p.Status()
	if st.Version == "" || st.Refused != nil || len(st.Warnings) != 1 {
		t.Fatalf("status: %+v, want one warning", st)
	}
	if w := st.Warnings[0]; w.File != "pylon.yaml" || w.Line == 0 || w.Name != "all" || w.Field == "" || !strings.Contains(w.Message, `"waiting"`) {
		t.Errorf("warning does not locate the route: %+v", w)
	}
	if n := strings.Count(logs.String(), "endpoint set is empty"); n != 1 {
		t.Errorf("the warning is logged %d times, want once:\n%s", n, logs.String())
	}
	fixed := strings.Replace(doc, "- name: waiting\n", "- name: waiting\n  endpoints: [{ address: 10.0.0.2, port: 8080 }]\n", 1)
	if err := p.Apply(newUpdate("pylon.yaml", []byte(fixed))); err != nil {
		t.Fatal(err)
	}
	if st := p.Status(); len(st.Warnings) != 0 {
		t.Fatalf("warnings after endpoints were added: %v", st.Warnings)
	}
}

// The publish stage given at construction decides: a change it refuses is
// reported like an invalid config and nothing is served, and a value on
// Retry makes Run apply the same update again, which it then publishes.
func TestPublishStageRefusesAndRetryAppliesAgain(t *testing.T) {
	pub := fleet.NewPublisher()
	refuse := true
	type result struct {
		r string
		f *fleet.Fleet
	}
	results := make(chan result, 2)
	retry := make(chan struct{}, 1)
	p := New(Options{Registry: xdstype.New(), Retry: retry,
		Publish: func(f *fleet.Fleet, _ []config.File) (bool, error) {
			if refuse {
				refuse = false
				return false, errors.New("group edge: rollout halted")
			}
			return pub.Publish(f), nil
		},
		OnResult: func(r string, f *fleet.Fleet) { results <- result{r, f} },
	})
	ctx, cancel := context.WithCancel(context.Background())
	in := make(chan source.Update)
	done := make(chan error)
	go func() { done <- p.Run(ctx, in) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()

	in <- newUpdate("pylon.yaml", golden(t, "valid_full.yaml"))
	for _, want := range []string{"refused", "published"} {
		select {
		case got := <-results:
			if got.r != want {
				t.Fatalf("result %q, want %q", got.r, want)
			}
			if want == "refused" {
				if pub.Current() != nil || p.Status().Refused == nil {
					t.Fatalf("a refused change was served (%v) or not reported: %+v", pub.Current() != nil, p.Status())
				}
				retry <- struct{}{}
				continue
			}
			if pub.Current() != got.f || p.Status().Refused != nil || p.Status().Version != got.f.Version() {
				t.Fatalf("the retried change is not what is served and reported: %+v", p.Status())
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no %s result", want)
		}
	}
}

// The status names the source's revision being served, and a refused
// change's own; a new revision of the same content is served as it.
func TestStatusNamesTheSourceRevision(t *testing.T) {
	var logs bytes.Buffer
	p := New(Options{Registry: xdstype.New(), Publish: PublishTo(fleet.NewPublisher()), Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	at := func(rev, name string) source.Update {
		u := newUpdate("pylon.yaml", golden(t, name))
		u.Revision = rev
		return u
	}
	if err := p.Apply(at("good1", "valid_full.yaml")); err != nil {
		t.Fatal(err)
	}
	if st := p.Status(); st.Revision != "good1" {
		t.Fatalf("serving revision %q, want good1", st.Revision)
	}
	if err := p.Apply(at("bad2", "dangling_refs.yaml")); err == nil {
		t.Fatal("bad config accepted")
	}
	st := p.Status()
	if st.Revision != "good1" || st.Refused == nil || st.Refused.Revision != "bad2" {
		t.Fatalf("after a refused revision: serving %q, refused %+v; want good1 served, bad2 refused", st.Revision, st.Refused)
	}
	if !strings.Contains(logs.String(), "revision=bad2") {
		t.Fatalf("the refusal's log line does not name its revision:\n%s", logs.String())
	}
	if err := p.Apply(at("same3", "valid_full.yaml")); err != nil {
		t.Fatal(err)
	}
	if st := p.Status(); st.Revision != "same3" || st.Refused != nil {
		t.Fatalf("after a revision of the same content: serving %q, refused %+v; want same3", st.Revision, st.Refused)
	}
}
