package source

import (
	"testing"
	"time"
)

// The first change after a quiet spell is due at once, however long the
// quiet period; a change within the gap of the last update waits for the
// gap's end, with every change made meanwhile folded into it.
func TestPacerSendsTheFirstChangeAtOnceAndSpacesABurst(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	p := Pacer{Quiet: 5 * time.Second}
	if p.Fire(ms(0)) {
		t.Fatal("fired with nothing pending")
	}
	p.Event(ms(10))
	if due, _ := p.Due(); !due.Equal(ms(10)) {
		t.Fatalf("the first change is due at +%v, want at once (+10ms), not after the quiet period", due.Sub(t0))
	}
	if !p.Fire(ms(10)) {
		t.Fatal("the first change did not fire at once")
	}
	p.Sent(ms(10))
	p.Event(ms(20))
	p.Event(ms(3000))
	if due, _ := p.Due(); !due.Equal(ms(5010)) {
		t.Fatalf("a change within the gap is due at +%v, want +5.01s (the quiet period after the last update)", due.Sub(t0))
	}
	if p.Fire(ms(5009)) || !p.Fire(ms(5010)) || p.Pending() {
		t.Fatal("the burst did not fire once, at the gap's end")
	}
	p.Sent(ms(5010))
	// Quiet past the gap: at once again.
	p.Event(ms(10011))
	if due, _ := p.Due(); !due.Equal(ms(10011)) {
		t.Fatalf("a change after a quiet spell is due at +%v, want at once", due.Sub(t0))
	}
}

// With Spacing, a burst's updates are that far apart when it is longer
// than Quiet (asked once an update), Quiet apart when shorter, and never
// more than MaxSpacing apart.
func TestPacerSpacesABurstBySpacing(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	spacing, asked := 700*time.Millisecond, 0
	p := Pacer{Quiet: 100 * time.Millisecond, Spacing: func() time.Duration { asked++; return spacing }}
	for _, c := range []struct{ spacing, want time.Duration }{
		{700 * time.Millisecond, 700 * time.Millisecond},
		{10 * time.Millisecond, 100 * time.Millisecond},
		{time.Hour, MaxSpacing},
	} {
		spacing = c.spacing
		p.Sent(t0)
		p.Event(t0.Add(time.Millisecond))
		if due, _ := p.Due(); due.Sub(t0) != c.want {
			t.Errorf("Spacing %v: the next update due after %v, want %v", c.spacing, due.Sub(t0), c.want)
		}
		if !p.Fire(t0.Add(c.want)) {
			t.Fatalf("Spacing %v: did not fire when due", c.spacing)
		}
	}
	if asked != 3 {
		t.Fatalf("Spacing asked %d times for 3 updates, want once each", asked)
	}
}
