package xds_test

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/pylon-xds/pylon/internal/status"
	"github.com/pylon-xds/pylon/internal/xds"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
)

// firstRequestBound is the tests' Options.FirstRequestTimeout: short, so
// that a silent stream's end comes well within xdstest.Timeout.
const firstRequestBound = 200 * time.Millisecond

func setupFirstRequestBound(t *testing.T) *env {
	t.Helper()
	rec := newRecorder()
	srv := xdstest.Start(t, xds.Options{Observer: rec, FirstRequestTimeout: firstRequestBound})
	srv.Publish(t, base()...)
	return &env{srv: srv, conn: xdstest.Dial(t, srv.Addr), rec: rec}
}

// wantNoRequestRefusal checks that err ends a stream that sent nothing
// in time, and that the refusal is reported with its reason.
func wantNoRequestRefusal(t *testing.T, e *env, err error, opened time.Time) {
	t.Helper()
	if grpcstatus.Code(err) != codes.DeadlineExceeded || !strings.Contains(err.Error(), "no request within 200ms") {
		t.Fatalf("a stream that sent nothing ended with %v, want DEADLINE_EXCEEDED saying no request came within the bound", err)
	}
	if took := time.Since(opened); took < firstRequestBound {
		t.Fatalf("ended after %v, before the %v bound", took, firstRequestBound)
	}
	e.rec.wait(t, func(ev status.Event) bool {
		return ev.Kind == status.StreamRefused && ev.Reason == xds.RefusedNoRequest
	})
}

// TestStreamThatSendsNoRequestEndsWithinTheBound: a stream that opens and
// sends nothing holds a goroutine and memory until its connection ends,
// and passes no admission: it is ended once FirstRequestTimeout has
// passed, refused as no_request, on SotW and delta alike.
func TestStreamThatSendsNoRequestEndsWithinTheBound(t *testing.T) {
	t.Run("sotw", func(t *testing.T) {
		e := setupFirstRequestBound(t)
		opened := time.Now()
		s := xdstest.OpenADS(t, e.conn, xdstest.Node("silent"))
		wantNoRequestRefusal(t, e, s.Err(), opened)
	})
	t.Run("delta", func(t *testing.T) {
		e := setupFirstRequestBound(t)
		opened := time.Now()
		s := xdstest.OpenDeltaADS(t, e.conn, xdstest.Node("silent"))
		wantNoRequestRefusal(t, e, s.Err(), opened)
	})
}

// TestStreamThatSendsItsFirstRequestInTimeIsServedPastTheBound: the bound
// is on the first request alone. A stream that sent one is served, and
// still is once the bound has passed: a silent stream opened after it is
// refused first, and the served stream's next request is answered.
func TestStreamThatSendsItsFirstRequestInTimeIsServedPastTheBound(t *testing.T) {
	e := setupFirstRequestBound(t)
	s := e.ads(t, "n1")
	s.Request(cds)
	s.ACK(s.RecvType(cds))
	opened := time.Now()
	silent := xdstest.OpenADS(t, e.conn, xdstest.Node("silent"))
	wantNoRequestRefusal(t, e, silent.Err(), opened)
	s.Request(lds, "l1")
	wantNames(t, s.RecvType(lds), "l1")
	s.ExpectSilence()
	if n := e.rec.count(func(ev status.Event) bool { return ev.Kind == status.StreamRefused && ev.NodeID() == "n1" }); n != 0 {
		t.Fatalf("the stream that sent in time was refused %d times", n)
	}
}
