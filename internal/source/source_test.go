package source

import (
	"testing"
	"time"
)

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

	t.Run("first is the burst start", func(t *testing.T) {
		d := Debouncer{Quiet: time.Millisecond}
		d.Event(ms(10))
		d.Event(ms(20))
		if !d.First().Equal(ms(10)) {
			t.Fatalf("first %v", d.First())
		}
	})
}
