package xds_test

import (
	"fmt"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/google/go-cmp/cmp"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/pylon-xds/pylon/internal/xds/protocol"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
)

// Error propagation (xRFC TP3, gRFC A88) over the wire: a client that
// announces protocol.ResourceErrorsFeature is told NOT_FOUND for a
// subscribed name it may not have, in the response that would otherwise
// leave it to its does-not-exist timer. The pure rules are in
// protocol/resourceerrors_test.go.

// readsErrors is a test node announcing that it reads resource_errors.
func readsErrors(id string) *corev3.Node {
	n := xdstest.Node(id)
	n.ClientFeatures = []string{protocol.ResourceErrorsFeature}
	return n
}

// errorNames are the names errs report NOT_FOUND, failing on other codes.
func errorNames(t *testing.T, errs []*discoveryv3.ResourceError) []string {
	t.Helper()
	var out []string
	for _, e := range errs {
		if e.GetErrorDetail().GetCode() != 5 {
			t.Errorf("%s: code %d, want NOT_FOUND (5)", e.GetResourceName().GetName(), e.GetErrorDetail().GetCode())
		}
		out = append(out, e.GetResourceName().GetName())
	}
	return out
}

func wantErrorNames(t *testing.T, when string, errs []*discoveryv3.ResourceError, want ...string) {
	t.Helper()
	if diff := cmp.Diff(want, errorNames(t, errs)); diff != "" {
		t.Fatalf("%s: resource_errors (-want +got):\n%s", when, diff)
	}
}

// TestResourceErrors_SotWMissingNameIsReportedNotFound: on SotW, a
// subscribed assignment that does not exist comes back NOT_FOUND with the
// others, once; a route configuration that is the only name asked for,
// which no response would answer (X22), gets a response of its error
// alone; a client that does not announce the feature gets neither.
func TestResourceErrors_SotWMissingNameIsReportedNotFound(t *testing.T) {
	e := setup(t, base()...)
	s := xdstest.OpenADS(t, e.conn, readsErrors("n1"))
	s.Request(eds, "a", "ghost")
	r := s.RecvType(eds)
	wantNames(t, r, "a")
	wantErrorNames(t, "first response", r.ResourceErrors, "ghost")
	if msg := r.ResourceErrors[0].GetErrorDetail().GetMessage(); msg != `ClusterLoadAssignment "ghost" not found` {
		t.Errorf("message %q", msg)
	}
	s.ACK(r, "a", "ghost")
	e.srv.Publish(t, aMoved()...)
	r = s.RecvType(eds)
	wantErrorNames(t, "a changed, ghost still missing", r.ResourceErrors)
	s.ACK(r, "a", "ghost")

	s.Request(rds, "nowhere")
	r = s.RecvType(rds)
	wantNames(t, r)
	wantErrorNames(t, "a missing route configuration alone", r.ResourceErrors, "nowhere")
	s.ACK(r, "nowhere")
	s.ExpectSilence()

	plain := e.ads(t, "n2")
	plain.Request(eds, "a", "ghost")
	r = plain.RecvType(eds)
	wantErrorNames(t, "a client without the feature", r.ResourceErrors)
	plain.ACK(r, "a", "ghost")
	plain.Request(rds, "nowhere")
	plain.ExpectSilence()
}

// TestResourceErrors_SotWDeletedNameIsReportedOnce: a subscribed
// assignment deleted by a publish is reported in a response of its own
// (SotW sends nothing for a deletion alone, X22), once.
func TestResourceErrors_SotWDeletedNameIsReportedOnce(t *testing.T) {
	e := setup(t, base()...)
	s := xdstest.OpenADS(t, e.conn, readsErrors("n1"))
	s.Request(eds, "a", "b")
	r := s.RecvType(eds)
	wantErrorNames(t, "both exist", r.ResourceErrors)
	s.ACK(r, "a", "b")
	e.srv.Publish(t, xdstest.Cluster("a"), xdstest.Endpoints("a", 1001), xdstest.APIListener("l1", "r1"), xdstest.Route("r1", "a"))
	r = s.RecvType(eds)
	wantNames(t, r)
	wantErrorNames(t, "b deleted", r.ResourceErrors, "b")
	s.ACK(r, "a", "b")
	s.ExpectSilence()
}

// TestResourceErrors_DeltaMissingNameIsReportedNotFound: on delta, the
// response listing a missing name in removed_resources (X33) reports it
// NOT_FOUND too; subscribing to it again reports it again.
func TestResourceErrors_DeltaMissingNameIsReportedNotFound(t *testing.T) {
	e := setup(t, base()...)
	s := xdstest.OpenDeltaADS(t, e.conn, readsErrors("n1"))
	s.Subscribe(eds, "a", "ghost")
	r := s.RecvType(eds)
	wantDelta(t, r, []string{"a"}, []string{"ghost"})
	wantErrorNames(t, "first response", r.ResourceErrors, "ghost")
	s.ACK(r)
	e.srv.Publish(t, aMoved()...)
	r = s.RecvType(eds)
	wantErrorNames(t, "a changed, ghost still missing", r.ResourceErrors)
	s.ACK(r)
	s.Subscribe(eds, "ghost")
	r = s.RecvType(eds)
	wantErrorNames(t, "subscribed again", r.ResourceErrors, "ghost")
}

// TestResourceErrors_WithheldSecretIsReportedAsMissing: a Secret the
// stream may not have (no verified client certificate) is reported in
// exactly the words of a Secret that does not exist.
func TestResourceErrors_WithheldSecretIsReportedAsMissing(t *testing.T) {
	e := setup(t, with(secret("held"))...)
	s := xdstest.OpenADS(t, e.conn, readsErrors("n1"))
	s.Request(sds, "held", "absent")
	r := s.RecvType(sds)
	wantNames(t, r)
	wantErrorNames(t, "withheld and absent", r.ResourceErrors, "absent", "held")
	for _, re := range r.ResourceErrors {
		want := &discoveryv3.ResourceError{
			ResourceName: &discoveryv3.ResourceName{Name: re.GetResourceName().GetName()},
			ErrorDetail:  &rpcstatus.Status{Code: 5, Message: fmt.Sprintf("Secret %q not found", re.GetResourceName().GetName())},
		}
		if diff := cmp.Diff(want, re, protocmp.Transform()); diff != "" {
			t.Errorf("error for %s (-want +got):\n%s", re.GetResourceName().GetName(), diff)
		}
	}
}

// aMoved is base with assignment a on another port.
func aMoved() []any {
	return []any{
		xdstest.Cluster("a"), xdstest.Cluster("b"),
		xdstest.Endpoints("a", 2001), xdstest.Endpoints("b", 1002),
		xdstest.APIListener("l1", "r1"), xdstest.Route("r1", "a"),
	}
}

// ghosts are n names that do not exist, in name order.
func ghosts(n int) []string {
	out := make([]string, 0, n)
	for i := range n {
		out = append(out, fmt.Sprintf("ghost%03d", i))
	}
	return out
}

// TestResourceErrors_SotWBacklogPastTheBoundFollowsTheACK: a client
// subscribed to more missing names than one response reports gets the
// rest in answer to its ACK of the capped response, with no publish in
// between, one bounded response per round trip.
func TestResourceErrors_SotWBacklogPastTheBoundFollowsTheACK(t *testing.T) {
	e := setup(t, base()...)
	s := xdstest.OpenADS(t, e.conn, readsErrors("n1"))
	names := append([]string{"a"}, ghosts(protocol.MaxResourceErrors+6)...)
	missing := names[1:]
	s.Request(eds, names...)
	r := s.RecvType(eds)
	wantNames(t, r, "a")
	wantErrorNames(t, "first response", r.ResourceErrors, missing[:protocol.MaxResourceErrors]...)
	s.ACK(r, names...)
	r = s.RecvType(eds)
	wantNames(t, r) // a unchanged: the client keeps it (X22)
	wantErrorNames(t, "answer to the ACK", r.ResourceErrors, missing[protocol.MaxResourceErrors:]...)
	s.ACK(r, names...)
	s.ExpectSilence()
}

// TestResourceErrors_DeltaBacklogPastTheBoundFollowsTheACK: the delta
// variant.
func TestResourceErrors_DeltaBacklogPastTheBoundFollowsTheACK(t *testing.T) {
	e := setup(t, base()...)
	s := xdstest.OpenDeltaADS(t, e.conn, readsErrors("n1"))
	missing := ghosts(protocol.MaxResourceErrors + 6)
	s.Subscribe(eds, append([]string{"a"}, missing...)...)
	r := s.RecvType(eds)
	wantErrorNames(t, "first response", r.ResourceErrors, missing[:protocol.MaxResourceErrors]...)
	s.ACK(r)
	r = s.RecvType(eds)
	wantDelta(t, r, nil, nil)
	wantErrorNames(t, "answer to the ACK", r.ResourceErrors, missing[protocol.MaxResourceErrors:]...)
	s.ACK(r)
	s.ExpectSilence()
}
