package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pylon-xds/pylon/internal/status"
)

// A Git source's polls are counted by result, from a fixed few; a poll
// that reached the host sets the last success's time; the commit at the
// ref is one series, replaced when the ref moves.
func TestGitPollMetrics(t *testing.T) {
	m := New(status.NewTracker(status.Options{}))
	names := []string{"pylon_git_polls_total", "pylon_git_last_success_timestamp_seconds", "pylon_git_commit_info"}
	if got := gather(t, m, names...); len(got) != 0 {
		t.Fatalf("before a poll: %v, want no series (no Git source, no alert)", got)
	}
	a, b := strings.Repeat("a", 40), strings.Repeat("b", 40)
	at := time.Unix(1_700_000_000, 0)
	m.GitPoll("read", a, at)
	m.GitPoll("unchanged", a, at.Add(time.Minute))
	m.GitPoll("failed", "", at.Add(2*time.Minute))
	m.GitPoll("timeout", "", at.Add(3*time.Minute))
	m.GitPoll("no such result", "not a commit", at.Add(4*time.Minute))
	want := map[string]float64{
		"pylon_git_polls_total result=read": 1, "pylon_git_polls_total result=unchanged": 1,
		"pylon_git_polls_total result=failed": 2, "pylon_git_polls_total result=timeout": 1,
		"pylon_git_last_success_timestamp_seconds": 1_700_000_060,
		"pylon_git_commit_info commit=" + a:        1,
	}
	if diff := cmp.Diff(want, gather(t, m, names...)); diff != "" {
		t.Fatalf("after five polls (-want +got):\n%s", diff)
	}
	m.GitPoll("bad_commit", b, at.Add(5*time.Minute))
	want["pylon_git_polls_total result=bad_commit"] = 1
	want["pylon_git_last_success_timestamp_seconds"] = 1_700_000_300
	delete(want, "pylon_git_commit_info commit="+a)
	want["pylon_git_commit_info commit="+b] = 1
	if diff := cmp.Diff(want, gather(t, m, names...)); diff != "" {
		t.Fatalf("after the ref moved (-want +got):\n%s", diff)
	}
}
