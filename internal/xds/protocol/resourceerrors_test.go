package protocol

import (
	"fmt"
	"testing"
	"time"

	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// Error propagation (xRFC TP3, gRFC A88) as pure functions of the core:
// which subscribed names a response reports NOT_FOUND, and when. Package
// xds's resourceerrors_test.go drives the same rules over the wire.

// errorNames are the names errs report, each checked to be NOT_FOUND.
func errorNames(t *testing.T, errs []*discoveryv3.ResourceError) []string {
	t.Helper()
	var out []string
	for _, e := range errs {
		if e.GetErrorDetail().GetCode() != grpcNotFound {
			t.Errorf("%s: code %d, want NOT_FOUND (5)", e.GetResourceName().GetName(), e.GetErrorDetail().GetCode())
		}
		out = append(out, e.GetResourceName().GetName())
	}
	return out
}

func wantErrors(t *testing.T, when string, errs []*discoveryv3.ResourceError, want ...string) {
	t.Helper()
	if diff := cmp.Diff(want, errorNames(t, errs)); diff != "" {
		t.Errorf("%s: resource_errors names (-want +got):\n%s", when, diff)
	}
}

// sotwRound plans typeURL on w for snap, returns the errors the response
// carries, and builds the response (as the stream does, errors first).
func sotwRound(b *bareStream, w *Watch, told *Told, snap *snapshot.Snapshot) []*discoveryv3.ResourceError {
	o, _ := w.Plan(b.planner(), snap.Set(w.Type.URL))
	errs := w.SotWErrors(told, o, snap.Set(w.Type.URL))
	b.respond(w, o, snap)
	return errs
}

// TestResourceErrors_SotWReportsASubscribedNameThatDoesNotExistOncePerChange:
// an assignment subscribed to and missing is reported NOT_FOUND with its
// name, once; not again on the next response; forgotten once it exists,
// and reported again when it is deleted.
func TestResourceErrors_SotWReportsASubscribedNameThatDoesNotExistOncePerChange(t *testing.T) {
	reg := xdstype.New()
	b := newBareStream(reg, NewSharing())
	told := NewTold()
	v1 := world(t, reg, 2, 9000, "c0") // c0, c1
	w := &Watch{}
	*w = NewWatch(reg.Lookup(xdstype.EndpointURL), b.cfg.share)
	b.watches[xdstype.EndpointURL] = w
	w.OnRequest(&discoveryv3.DiscoveryRequest{TypeUrl: xdstype.EndpointURL, ResourceNames: []string{"c0", "c2"}}, v1)
	errs := sotwRound(b, w, told, v1)
	wantErrors(t, "first response", errs, "c2")
	if len(errs) == 1 && errs[0].GetErrorDetail().GetMessage() != `ClusterLoadAssignment "c2" not found` {
		t.Errorf("message %q", errs[0].GetErrorDetail().GetMessage())
	}
	wantErrors(t, "next response, nothing changed", sotwRound(b, w, told, v1))

	v2 := world(t, reg, 3, 9000, "c0") // c2 exists
	wantErrors(t, "c2 published", sotwRound(b, w, told, v2))
	wantErrors(t, "c2 deleted again", sotwRound(b, w, told, v1), "c2")
}

// TestResourceErrors_SotWResubscribingReportsAgain: a name the client
// subscribes to afresh (it left the subscription, or it is asked for
// again by a new request) is reported again.
func TestResourceErrors_SotWResubscribingReportsAgain(t *testing.T) {
	reg := xdstype.New()
	b := newBareStream(reg, NewSharing())
	told := NewTold()
	v1 := world(t, reg, 1, 9000, "c0")
	nw := NewWatch(reg.Lookup(xdstype.EndpointURL), b.cfg.share)
	w := &nw
	b.watches[xdstype.EndpointURL] = w
	request := func(names ...string) {
		w.OnRequest(&discoveryv3.DiscoveryRequest{TypeUrl: xdstype.EndpointURL, ResponseNonce: w.Nonce, VersionInfo: w.Version, ResourceNames: names}, v1)
	}
	request("ghost")
	wantErrors(t, "subscribed", sotwRound(b, w, told, v1), "ghost")
	request("c0")
	wantErrors(t, "left", sotwRound(b, w, told, v1))
	request("c0", "ghost")
	wantErrors(t, "subscribed again", sotwRound(b, w, told, v1), "ghost")
}

// TestResourceErrors_AreBoundedPerResponse: at most MaxResourceErrors names
// per response, in name order; the rest in the next.
func TestResourceErrors_AreBoundedPerResponse(t *testing.T) {
	reg := xdstype.New()
	b := newBareStream(reg, NewSharing())
	told := NewTold()
	v1 := world(t, reg, 1, 9000, "c0")
	nw := NewWatch(reg.Lookup(xdstype.EndpointURL), b.cfg.share)
	w := &nw
	b.watches[xdstype.EndpointURL] = w
	var names []string
	for i := range MaxResourceErrors + 10 {
		names = append(names, fmt.Sprintf("g%03d", i))
	}
	w.OnRequest(&discoveryv3.DiscoveryRequest{TypeUrl: xdstype.EndpointURL, ResourceNames: names}, v1)
	wantErrors(t, "first response", sotwRound(b, w, told, v1), names[:MaxResourceErrors]...)
	wantErrors(t, "second response", sotwRound(b, w, told, v1), names[MaxResourceErrors:]...)
	wantErrors(t, "third response", sotwRound(b, w, told, v1))
}

// TestResourceErrors_BacklogPastTheBoundIsOwedTheClientsAnswer: errors
// that stop at MaxResourceErrors with more names untold leave a backlog,
// which the stream answers the client's ACK with; the response that tells
// the last of them leaves none. SotW and delta alike.
func TestResourceErrors_BacklogPastTheBoundIsOwedTheClientsAnswer(t *testing.T) {
	reg := xdstype.New()
	share := NewSharing()
	v1 := world(t, reg, 1, 9000, "c0")
	var names []string
	for i := range MaxResourceErrors + 6 {
		names = append(names, fmt.Sprintf("g%03d", i))
	}
	t.Run("sotw", func(t *testing.T) {
		b := newBareStream(reg, share)
		told := NewTold()
		nw := NewWatch(reg.Lookup(xdstype.EndpointURL), b.cfg.share)
		w := &nw
		b.watches[xdstype.EndpointURL] = w
		w.OnRequest(&discoveryv3.DiscoveryRequest{TypeUrl: xdstype.EndpointURL, ResourceNames: names}, v1)
		if told.Backlog(xdstype.EndpointURL) {
			t.Fatal("a backlog before any response")
		}
		wantErrors(t, "first response", sotwRound(b, w, told, v1), names[:MaxResourceErrors]...)
		if !told.Backlog(xdstype.EndpointURL) {
			t.Fatalf("no backlog after a response capped at %d with %d names untold", MaxResourceErrors, len(names)-MaxResourceErrors)
		}
		wantErrors(t, "answer to the ACK", sotwRound(b, w, told, v1), names[MaxResourceErrors:]...)
		if told.Backlog(xdstype.EndpointURL) {
			t.Fatal("a backlog after the last names were told")
		}
	})
	t.Run("delta", func(t *testing.T) {
		cfg := testPlanConfig(reg, share)
		told := NewTold()
		nw := NewDeltaWatch(reg.Lookup(xdstype.EndpointURL), share)
		w := &nw
		w.Subscribe(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: xdstype.EndpointURL, ResourceNamesSubscribe: names}, v1.Set(xdstype.EndpointURL))
		set := v1.Set(xdstype.EndpointURL)
		for i, want := range [][]string{names[:MaxResourceErrors], names[MaxResourceErrors:]} {
			d := w.Plan(soloPlanner(cfg, w), set, true, false)
			wantErrors(t, fmt.Sprintf("response %d", i+1), w.DeltaErrors(told, &d, set), want...)
			nonce := fmt.Sprint(i + 1)
			w.SentResponse(nonce, set.Version(), set, d, time.Now())
			w.Answered(nonce, false)
			if got, wantMore := told.Backlog(xdstype.EndpointURL), i == 0; got != wantMore {
				t.Fatalf("after response %d: backlog %v, want %v", i+1, got, wantMore)
			}
		}
	})
	if NewTold().Backlog(xdstype.EndpointURL) || (*Told)(nil).Backlog(xdstype.EndpointURL) {
		t.Error("an empty or nil record has a backlog")
	}
}

// TestResourceErrors_NotReportedForANameTheClientWillHold: a name gone
// from the set that the client still holds (make-before-break keeps it
// while something names it) is not "not found": the response carries it.
func TestResourceErrors_NotReportedForANameTheClientWillHold(t *testing.T) {
	reg := xdstype.New()
	b := newBareStream(reg, NewSharing())
	v1 := world(t, reg, 1, 9000, "c0")
	nw := NewWatch(reg.Lookup(xdstype.EndpointURL), b.cfg.share)
	w := &nw
	w.OnRequest(&discoveryv3.DiscoveryRequest{TypeUrl: xdstype.EndpointURL, ResourceNames: []string{"gone"}}, v1)
	held := world(t, reg, 1, 9000, "c0").Set(xdstype.EndpointURL).Get("c0")
	o := Outcome{Next: map[string]*snapshot.Resource{"gone": held}}
	wantErrors(t, "held", w.SotWErrors(NewTold(), o, v1.Set(xdstype.EndpointURL)))
	if errs := w.SotWErrors(nil, Outcome{}, v1.Set(xdstype.EndpointURL)); errs != nil {
		t.Errorf("a stream that does not read resource_errors got %d", len(errs))
	}
}

// TestResourceErrors_DeltaReportsMissingAndDeletedNamesOnce: the delta
// variant: a missing name is reported with the response that lists it in
// removed_resources, once; a deletion of a subscribed name is reported.
func TestResourceErrors_DeltaReportsMissingAndDeletedNamesOnce(t *testing.T) {
	reg := xdstype.New()
	share := NewSharing()
	cfg := testPlanConfig(reg, share)
	told := NewTold()
	v1 := world(t, reg, 2, 9000, "c0")
	v0 := world(t, reg, 1, 9000, "c0") // c1 deleted
	nw := NewDeltaWatch(reg.Lookup(xdstype.EndpointURL), share)
	w := &nw
	round := func(snap *snapshot.Snapshot, nonce string) []*discoveryv3.ResourceError {
		set := snap.Set(w.Type.URL)
		d := w.Plan(soloPlanner(cfg, w), set, true, false)
		errs := w.DeltaErrors(told, &d, set)
		w.SentResponse(nonce, set.Version(), set, d, time.Now())
		w.Answered(nonce, false)
		return errs
	}
	w.Subscribe(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: xdstype.EndpointURL, ResourceNamesSubscribe: []string{"c0", "c1", "ghost"}}, v1.Set(xdstype.EndpointURL))
	wantErrors(t, "first response", round(v1, "1"), "ghost")
	wantErrors(t, "c1 deleted", round(v0, "2"), "c1")
	wantErrors(t, "nothing changed", round(v0, "3"))
	w.Subscribe(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: xdstype.EndpointURL, ResourceNamesSubscribe: []string{"ghost"}}, v0.Set(xdstype.EndpointURL))
	wantErrors(t, "ghost subscribed afresh", round(v0, "4"), "ghost")
}

// TestResourceErrors_WithheldSecretReadsAsOneThatDoesNotExist: a Secret
// the secret policy withholds from the stream is reported in exactly the
// words of a Secret that does not exist: an unentitled client cannot tell
// which Secrets exist.
func TestResourceErrors_WithheldSecretReadsAsOneThatDoesNotExist(t *testing.T) {
	reg := xdstype.New()
	secret := func(name string) xdstype.Resource {
		return xdstype.Resource{Type: reg.Lookup(xdstype.SecretURL), Name: name, Message: &tlsv3.Secret{Name: name}}
	}
	full, err := snapshot.Build(reg, []xdstype.Resource{secret("held"), secret("other")})
	if err != nil {
		t.Fatal(err)
	}
	absent, err := snapshot.Build(reg, []xdstype.Resource{secret("other")})
	if err != nil {
		t.Fatal(err)
	}
	withheld := snapshot.Without(full, xdstype.SecretURL, []string{"held"})
	errorsFor := func(snap *snapshot.Snapshot) []*discoveryv3.ResourceError {
		b := newBareStream(reg, NewSharing())
		nw := NewWatch(reg.Lookup(xdstype.SecretURL), b.cfg.share)
		w := &nw
		b.watches[xdstype.SecretURL] = w
		w.OnRequest(&discoveryv3.DiscoveryRequest{TypeUrl: xdstype.SecretURL, ResourceNames: []string{"held"}}, snap)
		return sotwRound(b, w, NewTold(), snap)
	}
	got, want := errorsFor(withheld), errorsFor(absent)
	wantErrors(t, "withheld", got, "held")
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("a withheld Secret's error differs from a missing one's (-missing +withheld):\n%s", diff)
	}
}
