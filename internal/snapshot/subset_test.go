package snapshot_test

import (
	"slices"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"

	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// Without rebuilds one type's set and shares every other; the result has
// the versions (of each set, of the whole, and the shortest TTL) that a
// snapshot built from the remaining resources has.
func TestWithout(t *testing.T) {
	reg := xdstype.New()
	secret := func(n string) xdstype.Resource {
		return xdstype.Resource{Type: reg.Lookup(xdstype.SecretURL), Name: n, Message: &tlsv3.Secret{Name: n,
			Type: &tlsv3.Secret_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
				TrustedCa: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: n}}}}}}
	}
	short := secret("a")
	short.TTL = time.Second
	base := inputs(reg, cluster("c1", time.Second), cluster("c2", time.Second))
	s, err := snapshot.Build(reg, append(slices.Clone(base), short, secret("b"), secret("c")))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		names []string
		keep  []xdstype.Resource
	}{
		{[]string{"a", "c", "missing"}, []xdstype.Resource{secret("b")}},
		{nil, nil},
		{[]string{}, []xdstype.Resource{short, secret("b"), secret("c")}},
	} {
		got := snapshot.Without(s, xdstype.SecretURL, tc.names)
		want, err := snapshot.Build(reg, append(slices.Clone(base), tc.keep...))
		if err != nil {
			t.Fatal(err)
		}
		if got.Version() != want.Version() || got.MinTTL() != want.MinTTL() {
			t.Fatalf("without %v: version %s, min TTL %v; built: %s, %v", tc.names, got.Version(), got.MinTTL(), want.Version(), want.MinTTL())
		}
		for i, set := range got.Sets() {
			if set.Version() != want.Sets()[i].Version() || !slices.Equal(set.Names(), want.Sets()[i].Names()) {
				t.Fatalf("without %v: %s is %v, built %v", tc.names, set.Type().Abbrev, set.Names(), want.Sets()[i].Names())
			}
			if url := set.Type().URL; url != xdstype.SecretURL && set != s.Set(url) {
				t.Fatalf("without %v: %s was rebuilt, not shared", tc.names, set.Type().Abbrev)
			}
		}
	}
	if s.Set(xdstype.SecretURL).Len() != 3 {
		t.Fatal("Without changed its input")
	}
}
