package source

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/config"
)

// paths are the files' paths, in order.
func paths(u Update) []string {
	var out []string
	for _, f := range u.Files {
		out = append(out, f.Path)
	}
	return out
}

func TestMergeWaitsForEverySourceThenJoinsTheLatestOfEach(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	a, b, out := make(chan Update), make(chan Update), make(chan Update)
	done := make(chan error, 1)
	go func() { done <- Merge(ctx, out, a, b) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	recv := func() Update {
		t.Helper()
		select {
		case u := <-out:
			return u
		case <-time.After(5 * time.Second):
			t.Fatal("no merged update within 5s")
			return Update{}
		}
	}
	t0 := time.Unix(100, 0)
	a <- Update{Files: []config.File{{Path: "a1"}}, AcceptedAt: t0}
	select {
	case u := <-out:
		t.Fatalf("sent %v before every source had sent once", paths(u))
	case <-time.After(50 * time.Millisecond):
	}
	b <- Update{Files: []config.File{{Path: "b1"}, {Path: "b2"}}, AcceptedAt: t0.Add(time.Second)}
	u := recv()
	if got := paths(u); len(got) != 3 || got[0] != "a1" || got[1] != "b1" || got[2] != "b2" {
		t.Fatalf("first merge: files %v, want [a1 b1 b2]", got)
	}
	if !u.AcceptedAt.Equal(t0.Add(time.Second)) {
		t.Fatalf("first merge accepted at %v, want the last update's", u.AcceptedAt)
	}
	// A Git source names its commit: the merged config is that commit's
	// (with the cluster's objects), and /status says so.
	a <- Update{Files: []config.File{{Path: "a2"}}, AcceptedAt: t0.Add(2 * time.Second), Revision: "c0ffee"}
	u = recv()
	if got := paths(u); len(got) != 3 || got[0] != "a2" || got[1] != "b1" {
		t.Fatalf("after a's change: files %v, want [a2 b1 b2]", got)
	}
	if u.Revision != "c0ffee" {
		t.Fatalf("merged revision %q, want a's c0ffee", u.Revision)
	}
	b <- Update{Files: []config.File{{Path: "b3"}}, AcceptedAt: t0.Add(2500 * time.Millisecond)}
	if u := recv(); u.Revision != "c0ffee" {
		t.Fatalf("after b's change: revision %q, want a's c0ffee still", u.Revision)
	}
	bad := errors.New("cannot read")
	b <- Update{Err: bad, AcceptedAt: t0.Add(3 * time.Second)}
	if u := recv(); !errors.Is(u.Err, bad) {
		t.Fatalf("b's error not passed on: %v", u.Err)
	}
}
