package xds

import "testing"

func TestOnceSetIsBounded(t *testing.T) {
	o := newOnceSet(2)
	if !o.first("a") || o.first("a") {
		t.Fatal("a key is new once")
	}
	o.first("b")
	o.first("c") // evicts "a"
	if len(o.seen) != 2 {
		t.Fatalf("%d keys kept, want 2", len(o.seen))
	}
	if !o.first("a") {
		t.Fatal("an evicted key is new again")
	}
}
