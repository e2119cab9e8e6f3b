package source

import (
	"context"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/pylon-xds/pylon/internal/config"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestDebouncer(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }

	t.Run("quiet period", func(t *testing.T) {
		d := Debouncer{Quiet: 100 * time.Millisecond, MaxWait: time.Second}
		if d.Fire(ms(0)) {
			t.Fatal("fired with nothing pending")
		}
		d.Event(ms(0))
		d.Event(ms(50))
		if due, _ := d.Due(); !due.Equal(ms(150)) {
			t.Fatalf("due %v, want +150ms", due.Sub(t0))
		}
		if d.Fire(ms(149)) {
			t.Fatal("fired before the quiet period")
		}
		if !d.Fire(ms(150)) {
			t.Fatal("did not fire after the quiet period")
		}
		if d.Pending() || d.Fire(ms(500)) {
			t.Fatal("fired twice for one burst")
		}
	})

	t.Run("max wait bounds a steady trickle", func(t *testing.T) {
		d := Debouncer{Quiet: 100 * time.Millisecond, MaxWait: 300 * time.Millisecond}
		fired := 0
		for i := 0; i <= 1000; i += 50 { // an event every 50ms for a second
			if d.Fire(ms(i)) {
				fired++
			}
			d.Event(ms(i))
		}
		// Without MaxWait the trickle would never fire; with it, every 300ms.
		if fired != 3 {
			t.Fatalf("fired %d times in 1s, want 3", fired)
		}
	})

	t.Run("leading edge: the first event after a quiet spell fires after Settle", func(t *testing.T) {
		d := Debouncer{Quiet: 100 * time.Millisecond, MaxWait: time.Second, Settle: 10 * time.Millisecond}
		d.Event(ms(0))
		d.Event(ms(2)) // the same save's second event
		if due, _ := d.Due(); !due.Equal(ms(12)) {
			t.Fatalf("due %v, want +12ms (the last event, then Settle)", due.Sub(t0))
		}
		if d.Fire(ms(11)) || !d.Fire(ms(12)) {
			t.Fatal("did not fire exactly Settle after the last event")
		}
		// Within Quiet of the last event: a burst, batched.
		d.Event(ms(40))
		if due, _ := d.Due(); !due.Equal(ms(140)) {
			t.Fatalf("an event 38ms after the last is due %v, want +140ms (Quiet)", due.Sub(t0))
		}
		if !d.Fire(ms(140)) {
			t.Fatal("the burst did not fire after Quiet")
		}
		// A quiet spell again: at once but for Settle.
		d.Event(ms(240))
		if due, _ := d.Due(); !due.Equal(ms(250)) {
			t.Fatalf("an event after a quiet spell is due %v, want +250ms", due.Sub(t0))
		}
	})

	t.Run("leading edge: a trickle is still batched", func(t *testing.T) {
		d := Debouncer{Quiet: 100 * time.Millisecond, MaxWait: 300 * time.Millisecond, Settle: 10 * time.Millisecond}
		var fired []int
		for i := 0; i <= 1000; i += 5 { // every 5ms: fire when due, an event every 50ms
			if d.Fire(ms(i)) {
				fired = append(fired, i)
			}
			if i%50 == 0 {
				d.Event(ms(i))
			}
		}
		// The first after Settle, then MaxWait after each burst's first
		// event (50, 350 and 650 ms).
		if want := []int{10, 350, 650, 950}; !slices.Equal(fired, want) {
			t.Fatalf("fired at %v ms, want %v", fired, want)
		}
	})

	t.Run("without Settle every burst waits Quiet", func(t *testing.T) {
		d := Debouncer{Quiet: 100 * time.Millisecond, MaxWait: time.Second}
		d.Event(ms(0))
		if due, _ := d.Due(); !due.Equal(ms(100)) {
			t.Fatalf("due %v, want +100ms", due.Sub(t0))
		}
	})

	t.Run("first is the burst start", func(t *testing.T) {
		d := Debouncer{Quiet: time.Millisecond}
		d.Event(ms(10))
		d.Event(ms(20))
		if !d.First().Equal(ms(10)) {
			t.Fatalf("first %v", d.First())
		}
	})
}

// Replay forwards every update and re-sends the latest on a tick, with the
// tick's time; a tick before any update sends nothing.
func TestReplay(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	in, again, out := make(chan Update), make(chan time.Time), make(chan Update)
	done := make(chan error, 1)
	go func() { done <- Replay(ctx, in, again, out) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	recv := func() Update {
		t.Helper()
		select {
		case u := <-out:
			return u
		case <-time.After(5 * time.Second):
			t.Fatal("no update")
		}
		return Update{}
	}
	t0 := time.Unix(100, 0)
	again <- t0 // before any update: nothing to replay
	u1 := Update{Files: []config.File{{Path: "a", Data: []byte("1")}}, AcceptedAt: time.Unix(1, 0)}
	in <- u1
	if got := recv(); string(got.Files[0].Data) != "1" || !got.AcceptedAt.Equal(u1.AcceptedAt) {
		t.Fatalf("forwarded %+v; the tick before it sent something", got)
	}
	again <- time.Unix(200, 0)
	if got := recv(); string(got.Files[0].Data) != "1" || !got.AcceptedAt.Equal(time.Unix(200, 0)) {
		t.Fatalf("replayed %+v, want the latest update at the tick's time", got)
	}
	in <- Update{Files: []config.File{{Path: "a", Data: []byte("2")}}, AcceptedAt: time.Unix(2, 0)}
	recv()
	again <- time.Unix(300, 0)
	if got := recv(); string(got.Files[0].Data) != "2" {
		t.Fatalf("replayed %+v, want the newest update", got)
	}
}

// A burst made only of whole files is due at once; one event written in
// place makes the burst wait for quiet again.
func TestDebouncerWhole(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d := Debouncer{Quiet: time.Second, MaxWait: time.Minute}
	d.Whole(t0)
	if due, ok := d.Due(); !ok || !due.Equal(t0) {
		t.Fatalf("a whole file: due %v %v, want at once (%v)", due, ok, t0)
	}
	d.Whole(t0.Add(time.Millisecond))
	if !d.Fire(t0.Add(time.Millisecond)) {
		t.Fatal("two whole files did not fire at once")
	}
	d.Event(t0.Add(2 * time.Second))
	d.Whole(t0.Add(2*time.Second + time.Millisecond))
	if due, _ := d.Due(); !due.Equal(t0.Add(3*time.Second + time.Millisecond)) {
		t.Fatalf("a burst with a write in place is due %v, want after the quiet period", due)
	}
	if !d.Fire(t0.Add(4 * time.Second)) {
		t.Fatal("did not fire after the quiet period")
	}
	d.Event(t0.Add(5 * time.Second))
	if due, _ := d.Due(); !due.Equal(t0.Add(6 * time.Second)) {
		t.Fatalf("a new burst after a whole one is due %v, want after quiet", due)
	}
}
