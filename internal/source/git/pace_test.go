package git

import (
	"fmt"
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/source"
	"github.com/pylon-xds/pylon/internal/source/git/gittest"
)

// A push announced by the webhook after a quiet spell is read and sent at
// once, not after the quiet period (--debounce): a lone change is not a
// burst to fold.
func TestAWebhookAfterAQuietSpellIsReadAtOnce(t *testing.T) {
	const quiet = 5 * time.Second
	repo := gittest.New(t)
	repo.Commit(map[string]string{"pylon.yaml": "v1"})
	s, updates, _ := start(t, Options{URL: repo.FileURL(), Quiet: quiet})
	next(t, updates)
	second := repo.Commit(map[string]string{"pylon.yaml": "v2"})
	begin := time.Now()
	s.PollNow()
	wantFiles(t, next(t, updates), second, "pylon.yaml=v2;")
	if took := time.Since(begin); took > quiet/2 {
		t.Fatalf("the push was sent %v after the webhook, want well within the quiet period of %v", took.Round(time.Millisecond), quiet)
	}
}

// A burst of pushes, each announced by the webhook, is sent at most once
// per Spacing (the daemon's grows with the proxies a publish reaches, and
// is made after the source: SpaceBy) after the first, and its last push
// is sent.
func TestAWebhookBurstIsSentOncePerSpacing(t *testing.T) {
	const spacing = 400 * time.Millisecond
	repo := gittest.New(t)
	repo.Commit(map[string]string{"pylon.yaml": "v0"})
	s, _ := newSource(t, Options{URL: repo.FileURL()})
	s.SpaceBy(func() time.Duration { return spacing })
	updates := run(t, s)
	next(t, updates)
	const pushes = 20
	begin := time.Now()
	var last string
	for i := 1; i <= pushes; i++ {
		last = repo.Commit(map[string]string{"pylon.yaml": fmt.Sprintf("v%d", i)})
		s.PollNow()
	}
	burst := time.Since(begin)
	n := countUntil(t, updates, last)
	// One at once, one per spacing the burst lasted, one for its tail.
	if limit := 2 + int(burst/spacing); n > limit {
		t.Fatalf("%d pushes over %v were sent in %d updates, want at most %d (one per %v)", pushes, burst.Round(time.Millisecond), n, limit, spacing)
	}
}

// countUntil counts the updates until one of the commit rev, within wait.
func countUntil(t *testing.T, updates <-chan source.Update, rev string) int {
	t.Helper()
	deadline := time.After(wait)
	for n := 1; ; n++ {
		select {
		case u := <-updates:
			if u.Err != nil {
				t.Fatalf("update %d failed: %v", n, u.Err)
			}
			if u.Revision == rev {
				return n
			}
		case <-deadline:
			t.Fatalf("the last push (%s) was not sent within %v", rev, wait)
		}
	}
}
