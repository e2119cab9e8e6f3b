package metrics

import (
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// children hands out each label value's own child, the same one each
// time, past its bound too (then looked up, not kept).
func TestChildrenPerLabelValue(t *testing.T) {
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "c"}, []string{"type"})
	var c children[prometheus.Counter]
	for round := range 2 {
		for i := range maxChildren + 8 {
			v := fmt.Sprint("t", i)
			if got, want := c.of(v, vec.WithLabelValues), vec.WithLabelValues(v); got != want {
				t.Fatalf("round %d: %s's child is another's", round, v)
			}
		}
	}
	if n := len(c.m.Load()); n != maxChildren {
		t.Errorf("%d children kept, want the bound %d", n, maxChildren)
	}
}
