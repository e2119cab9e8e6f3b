package token

import "testing"

func TestEqual(t *testing.T) {
	for _, c := range []struct {
		presented, configured string
		want                  bool
	}{
		{"s3cret", "s3cret", true},
		{"s3cret", "s3cre", false},
		{"s3cre", "s3cret", false},
		{"S3cret", "s3cret", false},
		{"", "s3cret", false},
		// No token configured matches nothing, the empty one included.
		{"", "", false},
		{"anything", "", false},
	} {
		if got := Equal(c.presented, c.configured); got != c.want {
			t.Errorf("Equal(%q, %q) = %v, want %v", c.presented, c.configured, got, c.want)
		}
	}
}
