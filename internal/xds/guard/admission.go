package guard

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Admission protects the server from reconnect storms: it bounds the
// slots for sending first, full-state responses, and how many new streams
// start per second. A send holds its slot at most MaxSlotHold (the send
// watch gives it back early, SendWatch), so with the default 1s the
// slots bound initial sends started per second, not those in flight: a
// client that does not read cannot keep a slot. Excess streams wait, up to maxWait (well under
// the clients' 15 s does-not-exist timer); past it they are told to retry
// with RESOURCE_EXHAUSTED rather than all being served slowly.
type Admission struct {
	initial        chan struct{} // one token per initial-send slot held
	inFlight, peak atomic.Int64

	mu      sync.Mutex
	rate    float64 // new streams per second; 0: unbounded
	burst   float64
	tokens  float64
	last    time.Time
	maxWait time.Duration
}

// NewAdmission returns the bounds: maxInitial initial-send slots
// (Options.MaxInitialSends; 0 or less: no bound), streamsPerSecond new
// streams a second (0: no bound), and maxWait the longest a stream waits
// for either.
func NewAdmission(maxInitial int, streamsPerSecond float64, maxWait time.Duration) *Admission {
	a := &Admission{rate: streamsPerSecond, burst: max(streamsPerSecond, 1), maxWait: maxWait}
	a.tokens = a.burst
	if maxInitial > 0 {
		a.initial = make(chan struct{}, maxInitial)
	}
	return a
}

// Admit waits for a new stream's turn.
func (a *Admission) Admit(ctx context.Context) error {
	if a.rate <= 0 {
		return nil
	}
	a.mu.Lock()
	now := time.Now()
	if !a.last.IsZero() {
		a.tokens = min(a.burst, a.tokens+now.Sub(a.last).Seconds()*a.rate)
	}
	a.last = now
	a.tokens--
	wait := time.Duration(0)
	if a.tokens < 0 {
		wait = time.Duration(-a.tokens / a.rate * float64(time.Second))
	}
	if wait > a.maxWait {
		a.tokens++ // not taken
		a.mu.Unlock()
		return status.Errorf(codes.ResourceExhausted, "too many new xDS streams; retry in %s", wait.Round(time.Second))
	}
	a.mu.Unlock()
	if wait == 0 {
		return nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Acquire takes one of the initial-send tokens, waiting within the bound,
// and returns the function that gives it back (idempotent: the send
// watchdog may give it back early, for a send that stalls). With no bound
// it returns nil.
func (a *Admission) Acquire(ctx context.Context) (func(), error) {
	if a.initial == nil {
		return nil, nil
	}
	select {
	case a.initial <- struct{}{}:
	default:
		// Wait for a turn, within the bound.
		t := time.NewTimer(a.maxWait)
		defer t.Stop()
		select {
		case a.initial <- struct{}{}:
		case <-t.C:
			return nil, status.Errorf(codes.ResourceExhausted, "the server is busy sending initial configs; retry")
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	n := a.inFlight.Add(1)
	for p := a.peak.Load(); n > p && !a.peak.CompareAndSwap(p, n); p = a.peak.Load() {
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			a.inFlight.Add(-1)
			<-a.initial
		})
	}, nil
}

// Peak is the most initial-send slots seen held at once.
func (a *Admission) Peak() int64 { return a.peak.Load() }
