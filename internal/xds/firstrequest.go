package xds

import (
	"time"

	"google.golang.org/grpc/codes"
)

// A stream that opens and sends nothing holds its goroutine and buffers
// until its connection ends, yet has passed no admission (new streams a
// second, initial sends) and counts toward no balance: those apply once a
// request names the node (identify). Its wait for that first request is
// bounded (Options.FirstRequestTimeout): past it the stream ends as
// refused, RefusedNoRequest. Envoy and gRPC clients send their first
// request as soon as the stream opens.
//
// The bound's timer is the stream's greetTimer, unused until a request
// has come (greet.go): a field more would take every stream past its
// size class.

// awaitFirst arms the bound on the stream's first request: w is woken
// (wakeFirst) once it has passed. Called with st.mu held, before the
// stream runs.
func (st *stream) awaitFirst(w *wakeups) {
	st.greetTimer = time.AfterFunc(st.srv.opts.FirstRequestTimeout, func() { w.post(wakeFirst) })
}

// firstCame disarms the bound: a request came. Called with st.mu held.
func (st *stream) firstCame() {
	if st.greetTimer != nil {
		st.greetTimer.Stop()
		st.greetTimer = nil
	}
}

// noRequest is the refusal of a stream that sent nothing in time.
func (st *stream) noRequest() error {
	return refuse(RefusedNoRequest, codes.DeadlineExceeded, "no request within %s of the stream's opening: a client sends its first request, with its node, at once", st.srv.opts.FirstRequestTimeout)
}
