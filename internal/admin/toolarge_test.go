package admin

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/store/etcd/etcdtest"
)

// A write too large for one etcd transaction is refused with 413 and a
// message that fits a prune as well as an apply, not a 500; and a
// superseding write refused so stored nothing, so the halted rollout stays
// halted: the next plain write from anyone is still refused.
func TestWriteTooLargeForOneTransactionSupersedesNothing(t *testing.T) {
	ctrl := rollingController(t)
	st := etcdtest.Start(t).Open(t, "/pylon", 5*time.Second)
	h := newHarnessOn(t, Options{Token: writeTok, Rollouts: ctrl}, nil, st)
	doc := []byte(`{"groups": [{"name": "edge", "default": true}], "services": [{"name": "web", "endpoints": [{"address": "10.0.0.1", "port": 80}]}]}`)
	if code, body := h.do(t, "POST", "/v1/apply", writeTok, doc); code != http.StatusOK {
		t.Fatalf("apply: %d %s", code, body)
	}
	if _, err := ctrl.Halt("edge"); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString(`{"services": [`)
	for i := range 200 {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"name": "s%d", "endpoints": [{"address": "10.0.0.1", "port": 80}]}`, i)
	}
	b.WriteString("]}")
	code, body := h.do(t, "POST", "/v1/apply?supersede=true", writeTok, []byte(b.String()))
	if code != http.StatusRequestEntityTooLarge || !strings.Contains(body, "--max-txn-ops") || !strings.Contains(body, "prune") {
		t.Errorf("an apply of 200 objects on etcd: %d %s, want 413 naming --max-txn-ops and what to do for a prune", code, body)
	}
	if s := ctrl.Status(); len(s) != 1 || s[0].Supersede || len(ctrl.Halted()) != 1 {
		t.Fatalf("after a superseding write that stored nothing: %+v, want still halted, not superseded", s)
	}
}
