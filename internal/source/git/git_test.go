package git

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/pylon-xds/pylon/internal/source"
	"github.com/pylon-xds/pylon/internal/source/git/gittest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const wait = 20 * time.Second

// logBuffer is a log a test reads while the source writes it.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// start runs a source of o until the test ends and returns it, its
// updates and its log. The poll is an hour unless o says: a test polls
// with PollNow.
func start(t *testing.T, o Options) (*Source, <-chan source.Update, *logBuffer) {
	t.Helper()
	s, logs := newSource(t, o)
	return s, run(t, s), logs
}

// newSource is a source of o (polled hourly unless o says, paced
// briefly) and its log.
func newSource(t *testing.T, o Options) (*Source, *logBuffer) {
	t.Helper()
	if o.Poll == 0 {
		o.Poll = time.Hour
	}
	if o.Quiet == 0 {
		o.Quiet = 10 * time.Millisecond
	}
	if o.MinGap == 0 {
		o.MinGap = time.Millisecond
	}
	logs := &logBuffer{}
	o.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return s, logs
}

// run runs s until the test ends and returns its updates.
func run(t *testing.T, s *Source) <-chan source.Update {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan source.Update, 16)
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, out) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return out
}

// next is the next update, within a bound.
func next(t *testing.T, updates <-chan source.Update) source.Update {
	t.Helper()
	select {
	case u := <-updates:
		return u
	case <-time.After(wait):
		t.Fatal("no update")
		return source.Update{}
	}
}

func contents(u source.Update) string {
	var b strings.Builder
	for _, f := range u.Files {
		b.WriteString(f.Path + "=" + string(f.Data) + ";")
	}
	return b.String()
}

// wantFiles fails unless u is a good read of rev holding want.
func wantFiles(t *testing.T, u source.Update, rev, want string) {
	t.Helper()
	if u.Err != nil {
		t.Fatalf("update failed: %v", u.Err)
	}
	if u.Revision != rev || contents(u) != want {
		t.Fatalf("update of %s holds %q, want %s holding %q", u.Revision, contents(u), rev, want)
	}
}

// transports are the two ways a test reads a repository.
var transports = []struct {
	name string
	url  func(r *gittest.Repo) string
}{
	{"file", func(r *gittest.Repo) string { return r.FileURL() }},
	{"smart-http", func(r *gittest.Repo) string { return r.ServeHTTP("") }},
}

// A push is read at its commit: the folder's config files, named by their
// path in the repository, with the commit's SHA; files outside the folder
// and files that are not config are not read.
func TestServesTheFolderAtTheBranchTip(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			repo := gittest.New(t)
			first := repo.Commit(map[string]string{"configs/a.yaml": "A1", "configs/notes.txt": "x", "README.md": "r", "other/b.yaml": "no"})
			s, updates, _ := start(t, Options{URL: tr.url(repo), Path: "configs/"})
			wantFiles(t, next(t, updates), first, "configs/a.yaml=A1;")

			second := repo.Commit(map[string]string{"configs/a.yaml": "A2", "configs/b.yml": "B"})
			s.PollNow()
			wantFiles(t, next(t, updates), second, "configs/a.yaml=A2;configs/b.yml=B;")
		})
	}
}

// The poll finds a new commit by itself; a ref that has not moved sends
// nothing.
func TestPollsForNewCommits(t *testing.T) {
	repo := gittest.New(t)
	first := repo.Commit(map[string]string{"pylon.yaml": "v1"})
	_, updates, _ := start(t, Options{URL: repo.ServeHTTP(""), Poll: 20 * time.Millisecond})
	wantFiles(t, next(t, updates), first, "pylon.yaml=v1;")
	// Polls of the unmoved ref: nothing is sent, so the next update is
	// the next commit's.
	time.Sleep(100 * time.Millisecond)
	second := repo.Commit(map[string]string{"pylon.yaml": "v2"})
	wantFiles(t, next(t, updates), second, "pylon.yaml=v2;")
}

// A branch that disappears is an error (the pipeline keeps the last good
// config); when it is back, it is read again.
func TestDeletedRefIsAnError(t *testing.T) {
	repo := gittest.New(t)
	repo.Commit(map[string]string{"pylon.yaml": "v1"})
	repo.Commit(map[string]string{"x.yaml": "on the branch"})
	s, updates, _ := start(t, Options{URL: repo.FileURL(), Ref: "release"})
	if u := next(t, updates); u.Err == nil || !strings.Contains(u.Err.Error(), `no branch or tag "release"`) {
		t.Fatalf("missing ref: %v", u.Err)
	}
	repo.Tag("release")
	s.PollNow()
	u := next(t, updates)
	if u.Err != nil || !strings.Contains(contents(u), "x.yaml") {
		t.Fatalf("tag release: %v %q", u.Err, contents(u))
	}
}

// A folder the commit does not have is an error naming it.
func TestMissingFolderIsAnError(t *testing.T) {
	repo := gittest.New(t)
	repo.Commit(map[string]string{"pylon.yaml": "v1"})
	_, updates, _ := start(t, Options{URL: repo.FileURL(), Path: "configs"})
	if u := next(t, updates); u.Err == nil || !strings.Contains(u.Err.Error(), "has no folder configs") {
		t.Fatalf("missing folder: %v", u.Err)
	}
}

// A symbolic link in the repository is not followed: its target could be
// any file of the server.
func TestSymlinksAreNotRead(t *testing.T) {
	repo := gittest.New(t)
	repo.Commit(map[string]string{"a.yaml": "A"})
	secret := filepath.Join(t.TempDir(), "secret.yaml")
	if err := os.WriteFile(secret, []byte("SECRET"), 0o644); err != nil {
		t.Fatal(err)
	}
	rev := repo.Link("b.yaml", secret)
	_, updates, _ := start(t, Options{URL: repo.FileURL()})
	wantFiles(t, next(t, updates), rev, "a.yaml=A;")
}

func TestNewRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Options
		want string
	}{
		{"scp-like", Options{URL: "git@example.com:repo.git"}, "not a URL"},
		{"git protocol", Options{URL: "git://example.com/repo.git"}, "scheme must be https, ssh, http or file"},
		{"credentials in clear", Options{URL: "http://example.com/repo.git", CredentialsFile: "token"}, "in clear over http"},
		{"path outside", Options{URL: "file:///repo.git", Path: "../x"}, "inside the repository"},
	} {
		if _, err := New(tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// writePrivate writes a credentials file only its owner may read.
func writePrivate(t *testing.T, data string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "git-credentials")
	if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// A repository behind a token: no token or a wrong one is refused, the
// right one (bearer or basic) is read; no token, right or wrong, appears
// in an error or a log line.
func TestCredentials(t *testing.T) {
	const token, wrong = "s3cret-token-1234", "wrong-token-5678"
	repo := gittest.New(t)
	rev := repo.Commit(map[string]string{"pylon.yaml": "v1"})
	url := repo.ServeHTTP(token)
	for _, tc := range []struct {
		name, creds, url string
		ok               bool
	}{
		{"none", "", url, false},
		{"wrong token", wrong, url, false},
		{"wrong password", "git:" + wrong, url, false},
		{"wrong password in the URL", "", strings.Replace(url, "http://", "http://git:"+wrong+"@", 1), false},
		{"bearer", token, url, true},
		{"basic", "x-access-token:" + token + "\n", url, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := Options{URL: tc.url}
			if tc.creds != "" {
				o.CredentialsFile = writePrivate(t, tc.creds)
			}
			_, updates, logs := start(t, o)
			u := next(t, updates)
			if tc.ok {
				wantFiles(t, u, rev, "pylon.yaml=v1;")
			} else if u.Err == nil || !strings.Contains(u.Err.Error(), "authentication required") {
				t.Fatalf("got %v, want an authentication error", u.Err)
			}
			for _, secret := range []string{token, wrong} {
				if u.Err != nil && strings.Contains(u.Err.Error(), secret) {
					t.Errorf("the error shows a token: %v", u.Err)
				}
				if strings.Contains(logs.String(), secret) {
					t.Errorf("the log shows a token:\n%s", logs)
				}
			}
		})
	}
}

// A credentials file others may read is refused, as every key file is.
func TestCredentialsFileMustBePrivate(t *testing.T) {
	repo := gittest.New(t)
	repo.Commit(map[string]string{"pylon.yaml": "v1"})
	p := writePrivate(t, "token")
	if err := os.Chmod(p, 0o644); err != nil {
		t.Fatal(err)
	}
	_, updates, _ := start(t, Options{URL: repo.FileURL(), CredentialsFile: p})
	if u := next(t, updates); u.Err == nil || !strings.Contains(u.Err.Error(), "--git-credentials-file") {
		t.Fatalf("readable credentials: %v", u.Err)
	}
}

// A fetch brings one commit's objects into memory, at most MaxBytes of
// them: a repository that grew a large file is refused, not held.
func TestFetchIsBounded(t *testing.T) {
	repo := gittest.New(t)
	repo.Commit(map[string]string{"pylon.yaml": "v1", "other/big.bin": strings.Repeat("0123456789abcdef", 1<<12)})
	_, updates, _ := start(t, Options{URL: repo.ServeHTTP(""), MaxBytes: 16 << 10})
	if u := next(t, updates); u.Err == nil || !strings.Contains(u.Err.Error(), "over the limit of 16 KiB") {
		t.Fatalf("a commit of 64 KiB with a limit of 16 KiB: %v", u.Err)
	}
}

// Over SSH, the key file authenticates and the known_hosts file pins the
// host: the right key against the pinned host is read; another key, or a
// host whose key is not the one pinned, is refused; the key is never
// shown.
func TestSSH(t *testing.T) {
	repo := gittest.New(t)
	rev := repo.Commit(map[string]string{"pylon.yaml": "v1"})
	key, other := gittest.NewSSHKey(t), gittest.NewSSHKey(t)
	url, known := repo.ServeSSH(key.Public)
	_, wrongHost := repo.ServeSSH(key.Public) // another server's host key, for this address
	for _, tc := range []struct {
		name  string
		key   []byte
		hosts string
		want  string
	}{
		{"right key", key.Private, known, ""},
		{"wrong key", other.Private, known, "unable to authenticate"},
		{"unknown host key", key.Private, strings.Replace(wrongHost, wrongHost[:strings.Index(wrongHost, " ")], known[:strings.Index(known, " ")], 1), "key mismatch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := Options{URL: url, CredentialsFile: writePrivate(t, string(tc.key)), KnownHostsFile: filepath.Join(t.TempDir(), "known_hosts")}
			if err := os.WriteFile(o.KnownHostsFile, []byte(tc.hosts+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			_, updates, logs := start(t, o)
			u := next(t, updates)
			if tc.want == "" {
				wantFiles(t, u, rev, "pylon.yaml=v1;")
			} else if u.Err == nil || !strings.Contains(u.Err.Error(), tc.want) {
				t.Fatalf("got %v, want an error with %q", u.Err, tc.want)
			}
			body := strings.Split(string(tc.key), "\n")[1]
			if (u.Err != nil && strings.Contains(u.Err.Error(), body)) || strings.Contains(logs.String(), body) {
				t.Errorf("the key is shown: %v\n%s", u.Err, logs)
			}
		})
	}
}

// SSH needs a key and a known_hosts file: a host is never taken on its
// word.
func TestSSHNeedsKeyAndKnownHosts(t *testing.T) {
	for _, o := range []Options{
		{URL: "ssh://git@example.com/fleet.git", KnownHostsFile: "known_hosts"},
		{URL: "ssh://git@example.com/fleet.git", CredentialsFile: "key"},
	} {
		if _, err := New(o); err == nil || !strings.Contains(err.Error(), "over ssh:// needs --git-credentials-file (a private key) and --git-known-hosts") {
			t.Errorf("%+v: %v", o, err)
		}
	}
}

// silentHost accepts connections on 127.0.0.1 and never says a word, as
// a stalled SSH host; they close when the test ends. accepted receives
// once a connection is accepted.
func silentHost(t *testing.T) (addr string, accepted <-chan struct{}) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done, got := make(chan struct{}), make(chan struct{}, 1)
	go func() {
		defer close(done)
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			select {
			case got <- struct{}{}:
			default:
			}
		}
	}()
	t.Cleanup(func() {
		lis.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return lis.Addr().String(), got
}

// A host that accepts an SSH connection and then says nothing does not
// hold a stop: the connection ends with the source's context.
func TestStalledSSHHostDoesNotHoldAStop(t *testing.T) {
	addr, accepted := silentHost(t)
	key := gittest.NewSSHKey(t)
	known := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(known, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := New(Options{URL: "ssh://git@" + addr + "/repo.git", CredentialsFile: writePrivate(t, string(key.Private)), KnownHostsFile: known, Timeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Run(ctx, make(chan source.Update))
	}()
	select {
	case <-accepted: // the poll is connecting, and will wait for ever
	case <-time.After(wait):
		t.Fatal("the source did not connect")
	}
	cancel()
	select {
	case <-done:
	case <-time.After(2*time.Second + 5*time.Second):
		t.Fatal("Run did not return after its context ended: a stalled SSH host holds it")
	}
}
