package git

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/storage/memory"

	"github.com/pylon-xds/pylon/internal/source"
	"github.com/pylon-xds/pylon/internal/source/git/gittest"
)

// The misbehaviours of hostileHost.
const (
	behave      int32 = iota
	endlessRefs       // an advertisement of refs without end, each name 60 KiB
	endlessPack       // a fetch answered with shallow lines without end
	hugeRefusal       // 401 with a body of 4 MiB that echoes the credentials
	hugeHeaders       // 1 MiB of response headers
)

// hostileHost serves repo over smart HTTP, or misbehaves as mode says.
// The URL it returns carries a password, which no error may show.
func hostileHost(t *testing.T, repo *gittest.Repo, mode *atomic.Int32) string {
	t.Helper()
	good := repo.HTTPHandler("")
	url := repo.Serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch m := mode.Load(); {
		case m == endlessRefs && strings.HasSuffix(r.URL.Path, "/info/refs"):
			w.Header().Set("Content-Type", "application/x-git-upload-pack-advertisement")
			fmt.Fprint(w, "001e# service=git-upload-pack\n0000")
			name := strings.Repeat("r", 60<<10)
			for i := 0; r.Context().Err() == nil && i < 1<<20; i++ {
				line := fmt.Sprintf("%040x refs/heads/%s%d", i+1, name, i)
				if i == 0 {
					line += "\x00side-band-64k shallow"
				}
				if _, err := fmt.Fprintf(w, "%04x%s\n", len(line)+5, line); err != nil {
					return
				}
			}
		case m == endlessPack && r.Method == http.MethodPost:
			w.Header().Set("Content-Type", "application/x-git-upload-pack-result")
			for i := 0; r.Context().Err() == nil && i < 1<<24; i++ {
				if _, err := fmt.Fprintf(w, "0035shallow %040x\n", i); err != nil {
					return
				}
			}
		case m == hugeHeaders:
			for i := range 64 {
				w.Header().Set(fmt.Sprintf("X-Filler-%d", i), strings.Repeat("h", 16<<10))
			}
			w.WriteHeader(http.StatusOK)
		case m == hugeRefusal:
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintf(w, "you sent %q\x1b[2J", r.Header.Get("Authorization"))
			_, _ = w.Write([]byte(strings.Repeat("x", 4<<20)))
		default:
			good.ServeHTTP(w, r)
		}
	}))
	return strings.Replace(url, "http://", "http://git:pass-in-url-1234@", 1)
}

// wantRefusal fails unless u is an error naming the repository as
// shown (no password) and saying want.
func wantRefusal(t *testing.T, s *Source, u source.Update, want string) {
	t.Helper()
	if u.Err == nil || !strings.Contains(u.Err.Error(), want) || !strings.Contains(u.Err.Error(), s.Shown()) {
		t.Fatalf("got %v, want an error naming %s and saying %q", u.Err, s.Shown(), want)
	}
	if strings.Contains(u.Err.Error(), "pass-in-url-1234") {
		t.Fatalf("the error shows the URL's password: %v", u.Err)
	}
}

// A host that advertises refs without end (or refs of huge names) is cut
// off at MaxRefBytes, with an error naming the repository; when it
// behaves again, the last good commit is read again.
func TestEndlessRefAdvertisementIsRefused(t *testing.T) {
	repo := gittest.New(t)
	rev := repo.Commit(map[string]string{"pylon.yaml": "v1"})
	var mode atomic.Int32
	s, updates, _ := start(t, Options{URL: hostileHost(t, repo, &mode), MaxRefBytes: 256 << 10, Timeout: 10 * time.Second})
	wantFiles(t, next(t, updates), rev, "pylon.yaml=v1;")

	mode.Store(endlessRefs)
	s.PollNow()
	wantRefusal(t, s, next(t, updates), "ref advertisement is over the limit of 256 KiB")

	mode.Store(behave)
	s.PollNow()
	wantFiles(t, next(t, updates), rev, "pylon.yaml=v1;")
}

// A host that answers a fetch without end is cut off past what MaxBytes
// of objects can take; the fetch failed on the way, not for what the
// commit holds, so the next poll fetches the commit again.
func TestEndlessPackIsRefused(t *testing.T) {
	repo := gittest.New(t)
	repo.Commit(map[string]string{"pylon.yaml": "v1"})
	var mode atomic.Int32
	s, updates, _ := start(t, Options{URL: hostileHost(t, repo, &mode), MaxBytes: 64 << 10, Timeout: 10 * time.Second})
	next(t, updates)

	mode.Store(endlessPack)
	second := repo.Commit(map[string]string{"pylon.yaml": "v2"})
	s.PollNow()
	wantRefusal(t, s, next(t, updates), "the host sent more than 132 KiB for one commit")

	mode.Store(behave)
	s.PollNow()
	wantFiles(t, next(t, updates), second, "pylon.yaml=v2;")
}

// A host's answer of huge headers is cut off at 64 KiB, not held.
func TestHugeResponseHeadersAreRefused(t *testing.T) {
	repo := gittest.New(t)
	repo.Commit(map[string]string{"pylon.yaml": "v1"})
	var mode atomic.Int32
	mode.Store(hugeHeaders)
	s, updates, _ := start(t, Options{URL: hostileHost(t, repo, &mode)})
	wantRefusal(t, s, next(t, updates), "server response headers exceeded 65536 bytes")
}

// A commit of more objects than MaxObjects is refused, naming the bound.
func TestTooManyObjectsIsRefused(t *testing.T) {
	repo := gittest.New(t)
	files := map[string]string{"pylon.yaml": "v1"}
	for i := range 300 {
		files[fmt.Sprintf("other/f%d.txt", i)] = fmt.Sprint(i)
	}
	repo.Commit(files)
	s, updates, _ := start(t, Options{URL: repo.ServeHTTP(""), MaxObjects: 100})
	wantRefusal(t, s, next(t, updates), "more than 100 objects")
}

// A refusal's body is the host's to write: it is shown in part, without
// control characters, and without the credentials it echoes.
func TestHostsRefusalIsShownInPart(t *testing.T) {
	const token = "s3cret-token-1234"
	repo := gittest.New(t)
	repo.Commit(map[string]string{"pylon.yaml": "v1"})
	mode := &atomic.Int32{}
	mode.Store(hugeRefusal)
	for _, creds := range []string{token, "x-access-token:" + token} {
		s, updates, logs := start(t, Options{URL: hostileHost(t, repo, mode), CredentialsFile: writePrivate(t, creds)})
		u := next(t, updates)
		wantRefusal(t, s, u, "authentication required")
		msg := u.Err.Error()
		if len(msg) > 2<<10 || strings.ContainsAny(msg, "\x1b") {
			t.Errorf("the error is %d bytes, with control characters %v: %.300q", len(msg), strings.ContainsAny(msg, "\x1b"), msg)
		}
		for _, secret := range []string{token, "eC1hY2Nlc3MtdG9rZW46czNjcmV0LXRva2VuLTEyMzQ="} {
			if strings.Contains(msg, secret) || strings.Contains(logs.String(), secret) {
				t.Errorf("%s is shown: %.300q", secret, msg)
			}
		}
	}
}

// An SSH host that accepts the connection and never answers fails the
// poll at its timeout, naming the repository: the handshake is bounded,
// not only the connect.
func TestStalledSSHHandshakeTimesOut(t *testing.T) {
	addr, _ := silentHost(t)
	key := gittest.NewSSHKey(t)
	known := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(known, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s, _ := newSource(t, Options{URL: "ssh://git@" + addr + "/repo.git", CredentialsFile: writePrivate(t, string(key.Private)), KnownHostsFile: known, Timeout: 300 * time.Millisecond})
	p := &polls{}
	s.OnPoll(p.add)
	wantRefusal(t, s, next(t, run(t, s)), "no answer within 300ms")
	if r, _ := p.last(t, 1); r != PollTimeout {
		t.Fatalf("a poll past its timeout is reported %q, want %q", r, PollTimeout)
	}
}

// A folder's tree over 8 MiB (some 200,000 entries, decoded whole when
// the folder is read) is refused as it arrives, naming it.
func TestHugeTreeIsRefused(t *testing.T) {
	s, err := New(Options{URL: "https://git.example.com/fleet.git"})
	if err != nil {
		t.Fatal(err)
	}
	b := &bounded{Storage: memory.NewStorage(), w: &wire{s: s}, ref: "refs/heads/main", left: s.o.MaxBytes}
	tree := &plumbing.MemoryObject{}
	tree.SetType(plumbing.TreeObject)
	if _, err := tree.Write(make([]byte, maxTreeBytes+1)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.SetEncodedObject(tree); err == nil || !strings.Contains(err.Error(), "over the limit of 8192 KiB for one folder") || !strings.Contains(err.Error(), "git.example.com/fleet.git") {
		t.Fatalf("a tree of 8 MiB and a byte: %v", err)
	}
}

// polls records what a source's OnPoll is told.
type polls struct {
	mu  sync.Mutex
	got []Poll
}

func (p *polls) add(r Poll) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.got = append(p.got, r)
}

// last is the last poll's result and commit, once there are n.
func (p *polls) last(t *testing.T, n int) (string, string) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		p.mu.Lock()
		got := slices.Clone(p.got)
		p.mu.Unlock()
		if len(got) >= n {
			if got[n-1].At.IsZero() {
				t.Fatalf("poll %d has no time: %+v", n, got[n-1])
			}
			return got[n-1].Result, got[n-1].Commit
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d polls reported, want %d: %+v", len(got), n, got)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Every poll's result is reported, from a fixed few: the commit read,
// the ref unmoved, the host misbehaving, a commit refused for what it
// holds, and the timeout.
func TestEachPollIsReported(t *testing.T) {
	repo := gittest.New(t)
	first := repo.Commit(map[string]string{"configs/pylon.yaml": "v1"})
	var mode atomic.Int32
	s, _ := newSource(t, Options{URL: hostileHost(t, repo, &mode), Path: "configs", MaxRefBytes: 64 << 10})
	p := &polls{}
	s.OnPoll(p.add)
	run(t, s)

	type poll struct{ result, commit string }
	check := func(n int, want poll) {
		t.Helper()
		if r, c := p.last(t, n); r != want.result || c != want.commit {
			t.Fatalf("poll %d: %s %s, want %s %s", n, r, c, want.result, want.commit)
		}
	}
	check(1, poll{PollRead, first})
	s.PollNow()
	check(2, poll{PollUnchanged, first})
	mode.Store(endlessRefs)
	s.PollNow()
	check(3, poll{PollFailed, ""})
	mode.Store(behave)
	bad := repo.Commit(map[string]string{"configs/pylon.yaml": "", "other.yaml": "x"})
	s.PollNow()
	check(4, poll{PollBadCommit, bad})
}

// count is how many polls were reported.
func (p *polls) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.got)
}

// A caller of the webhook cannot make Pylon poll the host faster than
// MinGap: a flood of calls is one poll once the gap since the last has
// passed, not a poll per debounced burst.
func TestWebhookFloodIsOnePollPerGap(t *testing.T) {
	repo := gittest.New(t)
	repo.Commit(map[string]string{"pylon.yaml": "v1"})
	const gap = 800 * time.Millisecond
	s, _ := newSource(t, Options{URL: repo.ServeHTTP(""), MinGap: gap})
	p := &polls{}
	s.OnPoll(p.add)
	updates := run(t, s)
	next(t, updates)
	start := time.Now()
	for time.Since(start) < gap/2 {
		s.PollNow()
		time.Sleep(2 * time.Millisecond)
	}
	if r, _ := p.last(t, 2); r != PollUnchanged {
		t.Fatalf("the flood's poll: %s", r)
	}
	if took := time.Since(start); took < gap*3/4 {
		t.Fatalf("the flood was polled %s after it began, within the gap of %s", took, gap)
	}
	time.Sleep(gap) // room for any poll the flood should not have made
	if n := p.count(); n != 2 {
		t.Fatalf("%d polls for the first read and a flood of webhook calls, want 2: %+v", n, p.got)
	}
}
