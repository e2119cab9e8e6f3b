package protocol

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// pendingSent keeps what a map would, whichever response takes the first
// place: checked against a map over random sends and answers, with the
// oldest found wherever it is kept. A nil one is empty.
func TestPendingSentAsAMap(t *testing.T) {
	var none *pendingSent
	if _, ok := none.get("1"); ok || none.len() != 0 {
		t.Fatal("a nil pendingSent is not empty")
	}
	r := rand.New(rand.NewPCG(3, 4))
	t0 := time.Now()
	for run := range 100 {
		p := &pendingSent{}
		want := map[string]deltaSent{}
		next := 0
		for step := range 60 {
			if len(want) == 0 || r.IntN(3) > 0 {
				next++
				n := fmt.Sprint(next)
				s := deltaSent{at: t0.Add(time.Duration(next) * time.Second), version: "v" + n}
				p.put(n, s)
				want[n] = s
			} else {
				var n string
				for n = range want {
					break
				}
				delete(want, n)
				if empty := p.del(n); empty != (len(want) == 0) {
					t.Fatalf("run %d step %d: del reported empty %v with %d left", run, step, empty, len(want))
				}
			}
			if p.len() != len(want) {
				t.Fatalf("run %d step %d: len %d, want %d", run, step, p.len(), len(want))
			}
			oldest := ""
			for n, s := range want {
				if got, ok := p.get(n); !ok || got.version != s.version {
					t.Fatalf("run %d step %d: get(%s) = %v, %v", run, step, n, got, ok)
				}
				if oldest == "" || s.at.Before(want[oldest].at) {
					oldest = n
				}
			}
			if got := p.oldest(); got != oldest {
				t.Fatalf("run %d step %d: oldest %q, want %q", run, step, got, oldest)
			}
		}
	}
}
