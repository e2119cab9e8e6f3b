package status

import "testing"

// recorder is an Observer that keeps the kinds it is lent, and says it
// wants only want (nil: it does not say).
type recorder struct {
	got  *[]string
	name string
	want map[EventKind]bool
}

func (r recorder) Observe(e *Event) { *r.got = append(*r.got, r.name) }

type selective struct{ recorder }

func (s selective) Wants(k EventKind) bool { return s.want[k] }

// Composed observers are lent each event in turn, in order; they want a
// kind when any wants it, and one that does not say wants every kind.
func TestComposeObservers(t *testing.T) {
	var got []string
	a := &selective{recorder{got: &got, name: "a", want: map[EventKind]bool{RequestACK: true}}}
	b := &selective{recorder{got: &got, name: "b", want: map[EventKind]bool{ResponseSent: true}}}
	if ComposeObservers() != nil || ComposeObservers(nil, nil) != nil {
		t.Fatal("no observers composed into one")
	}
	if one := ComposeObservers(nil, a); one != Observer(a) {
		t.Fatalf("one observer composed into %T, want itself", one)
	}
	c := ComposeObservers(a, nil, b)
	c.Observe(&Event{Kind: StreamOpened})
	if len(got) != 2 || got[0] != "a" || got[1] != "b" {
		t.Fatalf("lent to %v, want a then b", got)
	}
	sel, ok := c.(Selective)
	if !ok {
		t.Fatal("composed observers are not Selective")
	}
	for k, want := range map[EventKind]bool{RequestACK: true, ResponseSent: true, ExpectedVersion: false, VersionTaken: false} {
		if sel.Wants(k) != want {
			t.Errorf("Wants(%d) = %v, want %v", k, !want, want)
		}
	}
	all := ComposeObservers(a, recorder{got: &got, name: "c"}).(Selective)
	if !all.Wants(ExpectedVersion) {
		t.Error("an observer that does not say what it wants does not get everything")
	}
}

// NodeID reads a nil node as none.
func TestEventNodeID(t *testing.T) {
	if id := (&Event{}).NodeID(); id != "" {
		t.Fatalf("no node: id %q", id)
	}
}
