package snapshot

import (
	"testing"

	"github.com/pylon-xds/pylon/internal/xdstype"
)

// oneType answers "" as soon as two refs differ, wherever they differ: a
// resource waiting on two types must take make-before-break's full check.
func TestOneType(t *testing.T) {
	c, e := xdstype.ClusterURL, xdstype.EndpointURL
	for _, tc := range []struct {
		refs []string
		want string
	}{
		{nil, ""},
		{[]string{c}, c},
		{[]string{c, c, c}, c},
		{[]string{c, c, e}, ""},
		{[]string{e, c, c}, ""},
	} {
		var refs []xdstype.Ref
		for _, u := range tc.refs {
			refs = append(refs, xdstype.Ref{TypeURL: u, Name: "n"})
		}
		if got := oneType(refs); got != tc.want {
			t.Errorf("oneType(%v) = %q, want %q", tc.refs, got, tc.want)
		}
	}
}
