// Package git is the Git source: a folder of a Git repository at the tip
// of a branch or tag, polled (and fetched at once on a webhook) and read
// like a watched folder. It speaks Git with go-git, in process: no git
// binary on the server, nothing written to its disk.
package git

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/transport"

	"github.com/pylon-xds/pylon/internal/loopback"
	"github.com/pylon-xds/pylon/internal/source"
)

// Options configures a Source.
type Options struct {
	// URL is the repository: https://, ssh://, http:// or file://.
	URL string
	// Ref is a branch or tag name, or a full ref (refs/...); default
	// "main".
	Ref string
	// Path is the folder in the repository whose config files make the
	// configuration; empty or "." is the repository's root.
	Path string
	// Poll is how often the ref is checked for a new commit (default
	// 30s).
	Poll time.Duration
	// CredentialsFile holds the credentials: over HTTP "user:password"
	// (basic auth) or a lone token (sent as a bearer token); over SSH a
	// private key (OpenSSH or PEM, no passphrase). Read at every poll, so
	// a rotation needs no restart. Empty: none (not over SSH).
	CredentialsFile string
	// KnownHostsFile pins the SSH host's keys (known_hosts format);
	// required over SSH: a host is never taken on its word.
	KnownHostsFile string
	// Timeout bounds one poll: listing the ref and fetching its commit
	// (default 1m).
	Timeout time.Duration
	// MaxBytes bounds the objects one fetch brings into memory: the
	// commit, its trees and every file of it, in the folder or not,
	// counted inflated, from the sizes the pack declares before any is
	// inflated (default DefaultMaxBytes); and so what the host may send
	// for them.
	MaxBytes int64
	// MaxObjects bounds how many objects (files and folders) one fetch
	// brings (default DefaultMaxObjects).
	MaxObjects int
	// MaxRefBytes bounds the host's ref advertisement, which names every
	// branch and tag of the repository (default DefaultMaxRefBytes).
	MaxRefBytes int64
	// Quiet is the least time between two updates (--debounce): a
	// webhook call after a quiet spell is polled at once, and the calls
	// of a burst are folded into polls whose updates are at least Quiet
	// apart, or Spacing when set and longer (source.Pacer; the daemon's
	// grows with the proxies a publish reaches).
	Quiet   time.Duration
	Spacing func() time.Duration
	// MinGap is the least time from one poll to a poll the webhook asks
	// for (default DefaultMinGap): calls within it are one poll at its
	// end, so no caller makes Pylon load the host faster.
	MinGap time.Duration
	Logger *slog.Logger
}

// Defaults of Options.
const (
	DefaultRef     = "main"
	DefaultPoll    = 30 * time.Second
	DefaultTimeout = time.Minute
	DefaultMinGap  = 5 * time.Second
	// DefaultMaxBytes is four times the config files' own limit
	// (config.MaxTotalBytes): room for what else the commit holds.
	DefaultMaxBytes = 256 << 20
	// DefaultMaxObjects is room for a monorepo's tree; a config
	// repository has a few hundred.
	DefaultMaxObjects = 200_000
	// DefaultMaxRefBytes holds some 500,000 refs (a large host's
	// repository, with its pull requests' refs, advertises a few hundred
	// thousand).
	DefaultMaxRefBytes = 32 << 20
)

// The results of a poll, as Poll reports them: a fixed few.
const (
	// PollRead: the ref moved, and its commit was read.
	PollRead = "read"
	// PollUnchanged: the ref has not moved since the last poll.
	PollUnchanged = "unchanged"
	// PollBadCommit: the ref moved to a commit refused for what it holds
	// (no such folder, over a bound); the next poll that finds the ref
	// moved again reads it.
	PollBadCommit = "bad_commit"
	// PollFailed: the host was not reached, refused the credentials,
	// has no such ref, or sent what it should not.
	PollFailed = "failed"
	// PollTimeout: the poll took longer than Options.Timeout.
	PollTimeout = "timeout"
)

// Poll is what one poll found, for metrics.
type Poll struct {
	// Result is one of the Poll* results.
	Result string
	// Commit is the commit read (PollRead) or found unmoved
	// (PollUnchanged), or the refused one (PollBadCommit); else empty.
	Commit string
	At     time.Time
}

// Source polls a Git repository.
type Source struct {
	// onPoll is told every poll's result (see OnPoll).
	onPoll func(Poll)
	o      Options
	log    *slog.Logger
	shown  string // the URL without its userinfo's password, for logs
	// http is the connections to an HTTP(S) host, reused from poll to
	// poll; each poll bounds what it reads over them (see wire).
	http *http.Transport
	// now carries webhook calls; one slot, a burst is one poll.
	now chan struct{}
	// last is the update last read, and its ref's hash: a poll that
	// finds the ref unmoved sends nothing, unless the last sent was an
	// error (then the last good read is sent again).
	last     *source.Update
	lastHash plumbing.Hash
	failed   bool
}

// New checks o and returns its source.
func New(o Options) (*Source, error) {
	u, err := url.Parse(o.URL)
	if err != nil {
		return nil, fmt.Errorf("--config-git: not a URL (for SSH, write ssh://user@host/path)")
	}
	switch u.Scheme {
	case "https", "http", "file":
	case "ssh":
		if o.CredentialsFile == "" || o.KnownHostsFile == "" {
			return nil, fmt.Errorf("--config-git %s: over ssh:// needs --git-credentials-file (a private key) and --git-known-hosts (the host's keys)", u.Redacted())
		}
	default:
		return nil, fmt.Errorf("--config-git %s: the scheme must be https, ssh, http or file", u.Redacted())
	}
	if o.CredentialsFile != "" && u.Scheme == "http" && !loopback.Host(u.Hostname()) {
		return nil, fmt.Errorf("--config-git %s: credentials would cross the network in clear over http; use https", u.Redacted())
	}
	if o.Ref == "" {
		o.Ref = DefaultRef
	}
	o.Path = strings.Trim(o.Path, "/")
	if o.Path == "." {
		o.Path = ""
	}
	if strings.Contains("/"+o.Path+"/", "/../") {
		return nil, fmt.Errorf("--git-path %q: must stay inside the repository", o.Path)
	}
	if o.Poll <= 0 {
		o.Poll = DefaultPoll
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MinGap <= 0 {
		o.MinGap = DefaultMinGap
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.MaxObjects <= 0 {
		o.MaxObjects = DefaultMaxObjects
	}
	if o.MaxRefBytes <= 0 {
		o.MaxRefBytes = DefaultMaxRefBytes
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	// A Git host's headers are a few hundred bytes; net/http's default
	// bound is 10 MiB.
	tr.MaxResponseHeaderBytes = 64 << 10
	return &Source{o: o, log: log, shown: u.Redacted(), http: tr, now: make(chan struct{}, 1)}, nil
}

// OnPoll makes f told every poll's result, from the goroutine that polls.
// Call it before Read and Run.
func (s *Source) OnPoll(f func(Poll)) { s.onPoll = f }

// SpaceBy sets Options.Spacing: the daemon's spacing is made after the
// source (it counts the responses of the streams, which start later).
// Call it before Run.
func (s *Source) SpaceBy(spacing func() time.Duration) { s.o.Spacing = spacing }

// Shown is the repository's URL as logs and errors show it: a password
// in it is masked.
func (s *Source) Shown() string { return s.shown }

// Where is the ref and folder served, as "main, configs/" (the folder
// "/" for the root).
func (s *Source) Where() string { return s.o.Ref + ", " + s.o.Path + "/" }

// PollNow makes Run poll at once (the webhook). It never blocks: calls
// while a poll is pending are that poll.
func (s *Source) PollNow() {
	select {
	case s.now <- struct{}{}:
	default:
	}
}

// Read polls once and returns the configuration at the ref's commit, or
// the update with Err that says why it cannot. The daemon reads the first
// one before anything listens; Run starts from it.
func (s *Source) Read(ctx context.Context) source.Update {
	u, _ := s.poll(ctx)
	return u
}

// Run sends the configuration to out once at the start and again on each
// poll (every Poll, and on webhook calls, paced by Quiet and Spacing) that
// finds a new commit or an error, until ctx ends.
func (s *Source) Run(ctx context.Context, out chan<- source.Update) error {
	defer s.http.CloseIdleConnections()
	send := func(u source.Update) bool {
		select {
		case out <- u:
			return true
		case <-ctx.Done():
			return false
		}
	}
	first := s.last
	if first == nil {
		u, _ := s.poll(ctx)
		if ctx.Err() != nil {
			return nil
		}
		first = &u
	}
	if !send(*first) {
		return nil
	}
	tick := time.NewTicker(s.o.Poll)
	defer tick.Stop()
	// Every update sent is marked in p, the periodic polls' too, so that
	// a webhook call right after one waits out its gap.
	p := source.Pacer{Quiet: s.o.Quiet, Spacing: s.o.Spacing}
	var due, held <-chan time.Time
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.now:
			p.Event(time.Now())
			if due == nil {
				due = after(&p)
			}
			continue
		case <-due:
			if !p.Fire(time.Now()) {
				due = after(&p)
				continue
			}
			due = nil
			if held = s.hold(last); held != nil {
				continue
			}
		case <-held:
			if held = s.hold(last); held != nil {
				continue
			}
		case <-tick.C:
		}
		// A stop ends the poll at once: every step of it (connect,
		// handshake, reads) ends with ctx.
		last = time.Now()
		u, changed := s.poll(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if changed {
			p.Sent(time.Now())
			if !send(u) {
				return nil
			}
		}
	}
}

// hold is when a poll the webhook asked for may run, MinGap after the
// last poll began; nil: now.
func (s *Source) hold(last time.Time) <-chan time.Time {
	if wait := s.o.MinGap - time.Since(last); wait > 0 {
		return time.After(wait)
	}
	return nil
}

// after is a channel that receives when p's pending calls are due.
func after(p *source.Pacer) <-chan time.Time {
	at, ok := p.Due()
	if !ok {
		return nil
	}
	return time.After(time.Until(at))
}

// poll lists the ref and, if it moved, fetches its commit and reads the
// folder. changed reports whether the update differs from the last sent:
// a ref that has not moved sends nothing, unless the poll before failed
// (then the last read is sent again, which ends the failure). A commit's
// verdict (read, or refused for what it holds) is kept until the ref
// moves; a fetch that failed on the way (the network, the time, the
// host) is tried again at the next poll.
func (s *Source) poll(ctx context.Context) (u source.Update, changed bool) {
	ctx, cancel := context.WithTimeout(ctx, s.o.Timeout)
	defer cancel()
	at := time.Now()
	w := &wire{s: s}
	auth, err := s.auth()
	var sess transport.UploadPackSession
	var ar *packp.AdvRefs
	var ref string
	var hash, want plumbing.Hash
	if err == nil {
		sess, ar, err = s.open(ctx, w, auth)
	}
	if err == nil {
		defer sess.Close()
		ref, hash, want, err = s.find(ar)
	}
	if err != nil {
		return s.failure(ctx, at, err, "git poll failed; the last good config keeps serving"), true
	}
	if s.last != nil && hash == s.lastHash {
		s.report(PollUnchanged, s.last.Revision, at)
		changed, s.failed = s.failed, false
		return *s.last, changed
	}
	u = source.Update{AcceptedAt: at}
	var verdict bool
	u.Files, u.Revision, verdict, u.Err = s.read(ctx, w, sess, ar, ref, want)
	if u.Err != nil && !verdict {
		return s.failure(ctx, at, u.Err, "git commit not fetched; the last good config keeps serving"), true
	}
	s.failed = false
	if u.Err != nil {
		u.Err = s.scrub(ctx, u.Err)
		s.report(PollBadCommit, u.Revision, at)
		s.log.Warn("git commit not read; the last good config keeps serving", "repository", s.shown, "ref", ref, "commit", u.Revision, "err", u.Err)
	} else {
		s.report(PollRead, u.Revision, at)
		s.log.Info("git commit read", "repository", s.shown, "ref", ref, "commit", u.Revision, "files", len(u.Files))
	}
	s.last, s.lastHash = &u, hash
	return u, true
}

// failure is the update of a poll that failed before a commit's verdict:
// the next poll tries again.
func (s *Source) failure(ctx context.Context, at time.Time, err error, msg string) source.Update {
	s.failed = true
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		s.report(PollTimeout, "", at)
	} else {
		s.report(PollFailed, "", at)
	}
	err = s.scrub(ctx, err)
	s.log.Warn(msg, "repository", s.shown, "err", err)
	return source.Update{Err: err, AcceptedAt: at}
}

// report tells OnPoll's function what a poll found.
func (s *Source) report(result, commit string, at time.Time) {
	if s.onPoll != nil {
		s.onPoll(Poll{Result: result, Commit: commit, At: at})
	}
}
