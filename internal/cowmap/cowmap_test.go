package cowmap

import (
	"fmt"
	"sync"
	"testing"
)

// The first value stored under a key is the one every caller gets; past
// the limit new keys are not kept; Store replaces a kept key at the limit.
func TestLoadOrStoreAndStore(t *testing.T) {
	var m Map[string, int]
	if m.Load() != nil {
		t.Fatal("an empty map loads as non-nil")
	}
	if got := m.LoadOrStore("a", 1, 2); got != 1 {
		t.Fatalf("first store of a gave %d", got)
	}
	if got := m.LoadOrStore("a", 2, 2); got != 1 {
		t.Fatalf("second store of a gave %d, want the first value", got)
	}
	m.LoadOrStore("b", 3, 2)
	if got := m.LoadOrStore("c", 4, 2); got != 4 || len(m.Load()) != 2 {
		t.Fatalf("past the limit: got %d, %d keys kept", got, len(m.Load()))
	}
	m.Store("a", 5, 2)
	m.Store("d", 6, 2)
	if got := m.Load(); got["a"] != 5 || len(got) != 2 {
		t.Fatalf("after Store: %v", got)
	}
}

// A loaded map never changes: readers on other goroutines see a whole
// map, old or new (under -race: no write to a published map).
func TestReadersWhileStoring(t *testing.T) {
	var m Map[string, string]
	var wg sync.WaitGroup
	for r := range 4 {
		wg.Go(func() {
			for i := range 1000 {
				k := fmt.Sprint(i)
				if got := m.LoadOrStore(k, k, 10000); got != k {
					t.Errorf("reader %d: %q under %q", r, got, k)
					return
				}
				_ = len(m.Load())
			}
		})
	}
	wg.Wait()
	if n := len(m.Load()); n != 1000 {
		t.Fatalf("%d keys kept, want 1000", n)
	}
}
