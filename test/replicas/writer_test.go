package replicas_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// ack is a write a replica acknowledged (200), with what it answered.
type ack struct {
	name     string
	revision int64
	version  string
}

// writer applies a sequence of distinct writes (services named
// PREFIX-0, PREFIX-1, ...) through one replica, one at a time, and records
// what each got: acknowledged with its revision, refused with 503 (etcd
// unavailable: a clear refusal, nothing written), refused with 409 (the
// store kept changing under the write while other replicas wrote: nothing
// written, the answer says to retry), or no answer (the replica died, the
// request timed out: the outcome is unknown). Anything else is a wrong
// answer.
type writer struct {
	r      *replica
	prefix string
	cancel context.CancelFunc
	done   chan struct{}

	mu        sync.Mutex
	wake      chan struct{}
	acked     []ack
	refused   int      // 503s
	conflicts int      // 409s saying to retry
	unknown   int      // no answer
	wrong     []string // anything else
	attempted int
}

// Bounds of a writer: at most maxWrites attempts, and a pause after a write
// that failed so that a dead replica is not hammered.
const (
	maxWrites  = 400
	afterFault = 20 * time.Millisecond
)

// startWriter writes through r until stopped (or the test ends).
func startWriter(t *testing.T, r *replica, prefix string) *writer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &writer{r: r, prefix: prefix, cancel: cancel, done: make(chan struct{}), wake: make(chan struct{})}
	go w.run(ctx)
	t.Cleanup(w.stop)
	return w
}

func (w *writer) run(ctx context.Context) {
	defer close(w.done)
	for i := 0; i < maxWrites && ctx.Err() == nil; i++ {
		name := fmt.Sprintf("%s-%d", w.prefix, i)
		code, body, err := w.r.doCtx(ctx, "POST", "/v1/apply", serviceDoc(name, i), true)
		if ctx.Err() != nil {
			return // stopped mid-request: its outcome is not recorded
		}
		if !w.record(name, code, body, err) {
			select {
			case <-ctx.Done():
			case <-time.After(afterFault):
			}
		}
	}
}

// record notes a write's outcome and reports whether it was acknowledged.
func (w *writer) record(name string, code int, body []byte, err error) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	defer func() {
		close(w.wake)
		w.wake = make(chan struct{})
	}()
	w.attempted++
	var res writeResult
	switch {
	case err != nil:
		w.unknown++
	case code == http.StatusOK && json.Unmarshal(body, &res) == nil && res.Revision > 0:
		w.acked = append(w.acked, ack{name: name, revision: res.Revision, version: res.Version})
		return true
	case code == http.StatusServiceUnavailable && json.Unmarshal(body, &res) == nil && strings.Contains(res.Error, "etcd"):
		w.refused++
	case code == http.StatusConflict && json.Unmarshal(body, &res) == nil && strings.Contains(res.Error, "retry"):
		w.conflicts++
	default:
		w.wrong = append(w.wrong, fmt.Sprintf("%s through %s: %d %s", name, w.r.id, code, body))
	}
	return false
}

// stop ends the writer (an in-flight write is abandoned) and waits for it.
func (w *writer) stop() {
	w.cancel()
	<-w.done
}

// waitAcked waits until n more writes than now are acknowledged, within
// bound.
func (w *writer) waitAcked(t *testing.T, n int) {
	t.Helper()
	w.mu.Lock()
	want := len(w.acked) + n
	w.mu.Unlock()
	deadline := time.NewTimer(bound)
	defer deadline.Stop()
	for {
		w.mu.Lock()
		got, wake := len(w.acked), w.wake
		w.mu.Unlock()
		if got >= want {
			return
		}
		select {
		case <-wake:
		case <-w.done:
			t.Fatalf("writer through %s ended with %d of %d writes acknowledged: %s", w.r.id, got, want, w.summary())
		case <-deadline.C:
			t.Fatalf("writer through %s: %d of %d writes acknowledged within %v: %s", w.r.id, got, want, bound, w.summary())
		}
	}
}

// unanswered is the number of writes that got no answer.
func (w *writer) unanswered() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.unknown
}

// results are the writer's records, once stopped.
func (w *writer) results() []ack {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]ack(nil), w.acked...)
}

func (w *writer) summary() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return fmt.Sprintf("%d attempted, %d acknowledged, %d refused with 503, %d refused with 409 (retry), %d unanswered, %d wrong %v",
		w.attempted, len(w.acked), w.refused, w.conflicts, w.unknown, len(w.wrong), w.wrong)
}

// checkWrong fails the test for any answer that was neither an
// acknowledgement nor a clear refusal.
func (w *writer) checkWrong(t *testing.T) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range w.wrong {
		t.Errorf("a write neither acknowledged nor refused clearly (503 naming etcd, 409 saying to retry): %s", s)
	}
}

// storedObjects is /v1/objects: each object's revision by kind/name.
func (r *replica) storedObjects() (map[string]int64, int64) {
	r.f.t.Helper()
	var body struct {
		Revision int64 `json:"revision"`
		Objects  []struct {
			Kind     string `json:"kind"`
			Name     string `json:"name"`
			Revision int64  `json:"revision"`
		} `json:"objects"`
	}
	r.getJSON("/v1/objects", &body)
	out := map[string]int64{}
	for _, o := range body.Objects {
		out[o.Kind+"/"+o.Name] = o.Revision
	}
	return out, body.Revision
}

// history is /v1/history: each entry's fleet version by revision.
func (r *replica) history() map[int64]string {
	r.f.t.Helper()
	var body struct {
		History []struct {
			Revision int64  `json:"revision"`
			Version  string `json:"version"`
		} `json:"history"`
	}
	r.getJSON("/v1/history", &body)
	out := map[int64]string{}
	for _, e := range body.History {
		out[e.Revision] = e.Version
	}
	return out
}

// checkAcked requires every acknowledged write in r's store: the object at
// the revision it was acknowledged with, the history entry of that
// revision with the version it answered; one writer's revisions
// increasing.
func checkAcked(t *testing.T, r *replica, acked []ack) {
	t.Helper()
	objs, rev := r.storedObjects()
	hist := r.history()
	var last int64
	for _, a := range acked {
		if a.revision <= last {
			t.Errorf("%s acknowledged at revision %d, after a write at %d", a.name, a.revision, last)
		}
		last = a.revision
		if got, ok := objs["services/"+a.name]; !ok || got != a.revision {
			t.Errorf("acknowledged write %s (revision %d) is not in %s's store: stored at %d (present: %v)", a.name, a.revision, r.id, got, ok)
		}
		if v, ok := hist[a.revision]; !ok || v != a.version {
			t.Errorf("acknowledged write %s: %s's history at revision %d holds version %q (present: %v), the write answered %q", a.name, r.id, a.revision, v, ok, a.version)
		}
	}
	if last > rev {
		t.Errorf("%s's store is at revision %d, before the acknowledged %d", r.id, rev, last)
	}
}
