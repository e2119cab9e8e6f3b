package xds

import (
	"slices"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"

	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// Streams with the same entitlement serve one shared snapshot less what
// they are denied, built once; everything else in it is what the group's
// snapshot holds, at the same versions.
func TestWithheldSnapshotsAreShared(t *testing.T) {
	reg := xdstype.New()
	srv := New(Options{Registry: reg, Fleets: snapshot.NewPublisher()})
	group := world(t, reg, 3, 1000, "c0")
	var inputs []snapshot.Input
	for _, set := range group.Sets() {
		for _, n := range set.Names() {
			inputs = append(inputs, snapshot.Input{Type: set.Type(), Name: n, Message: set.Get(n).Message})
		}
	}
	for _, n := range []string{"a", "b", "c"} {
		inputs = append(inputs, snapshot.Input{Type: reg.Lookup(xdstype.SecretURL), Name: n, Message: &tlsv3.Secret{Name: n,
			Type: &tlsv3.Secret_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
				TrustedCa: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: n}}}}}})
	}
	snap, err := snapshot.Build(reg, inputs)
	if err != nil {
		t.Fatal(err)
	}

	one, two := srv.withhold(snap, []string{"a", "c"}), srv.withhold(snap, []string{"a", "c"})
	if one != two {
		t.Fatal("two streams denied the same Secrets got different snapshots")
	}
	if got := one.snap.Set(xdstype.SecretURL).Names(); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("withholding a and c left %v", got)
	}
	for _, set := range snap.Sets() {
		if url := set.Type().URL; url != xdstype.SecretURL && one.snap.Set(url) != set {
			// The same *Set, not an equal copy: planning is shared per set.
			t.Fatalf("%s is not the group's own set when only Secrets were withheld", set.Type().Abbrev)
		}
	}
	if all := srv.withhold(snap, nil); all.snap.Set(xdstype.SecretURL).Len() != 0 || all == one {
		t.Fatalf("withholding every Secret left %v", all.snap.Set(xdstype.SecretURL).Names())
	}
}
