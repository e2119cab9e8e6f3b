package main

import "testing"

// The reconnect's cell says what the server refused during the step (not
// before it) and what the proxies retried, and nothing when neither.
func TestEnded(t *testing.T) {
	for _, c := range []struct {
		retries       int64
		before, after map[string]float64
		want          string
	}{
		{0, nil, nil, ""},
		{0, map[string]float64{"busy": 3}, map[string]float64{"busy": 3}, ""},
		{5, map[string]float64{"busy": 1}, map[string]float64{"busy": 4, "stalled": 2}, "; 5 retried, refused busy 3, stalled 2"},
		{2, nil, nil, "; 2 retried"},
	} {
		if got := ended(c.retries, c.before, c.after); got != c.want {
			t.Errorf("ended(%d, %v, %v) = %q, want %q", c.retries, c.before, c.after, got, c.want)
		}
	}
}
