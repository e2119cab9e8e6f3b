// Package pipeline is the reconcile loop: every update from a source is
// decoded, validated and built into a snapshot, then published, or refused
// as a whole with diagnostics while the last good snapshot keeps serving.
// An update that reads as the last good one did (a resync of an unchanged
// config, its certificates unchanged too) is not built again.
package pipeline

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/pylon-xds/pylon/internal/compile"
	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/diag"
	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/redact"
	"github.com/pylon-xds/pylon/internal/source"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// Status is what the pipeline last did, for the admin API.
type Status struct {
	// Version is the fleet version being served ("" before the first).
	Version string `json:"version"`
	// Revision is the source's name for the config being served (a Git
	// commit's SHA); empty for sources without one.
	Revision    string        `json:"revision,omitempty"`
	AcceptedAt  time.Time     `json:"acceptedAt,omitzero"`
	PublishedAt time.Time     `json:"publishedAt,omitzero"`
	Groups      []GroupStatus `json:"groups"`
	// Refused is the last refused change, cleared when a good one lands.
	Refused *Refusal `json:"refused,omitempty"`
	// Warnings are what the config being served was accepted with but an
	// operator should hear of (compile.CompileWithWarnings): a route to a
	// cluster whose endpoint set is empty.
	// At most MaxWarnings are kept, the first; WarningsTotal counts them
	// all.
	Warnings      []diag.Diagnostic `json:"warnings,omitempty"`
	WarningsTotal int               `json:"warningsTotal,omitempty"`
}

// MaxWarnings bounds the warnings a status keeps (and every place that
// shows them: /status, /summary, the dashboard, pylon status and pylon
// validate): a config of thousands of routes to a service with no
// endpoints has as many warnings, and /status is polled every few
// seconds.
const MaxWarnings = 50

// GroupStatus is one node group's snapshot.
type GroupStatus struct {
	Name      string         `json:"name"`
	Version   string         `json:"version"`
	Resources map[string]int `json:"resources"`
}

// Refusal is a change that was not published.
type Refusal struct {
	At time.Time `json:"at"`
	// Revision is the source's name for the refused change (a Git
	// commit's SHA), if it has one.
	Revision    string            `json:"revision,omitempty"`
	Error       string            `json:"error"`
	Diagnostics []diag.Diagnostic `json:"diagnostics,omitempty"`
	// DiagnosticsTotal counts them all when there are more than
	// MaxDiagnostics; Diagnostics and Error hold the first.
	DiagnosticsTotal int `json:"diagnosticsTotal,omitempty"`
}

// MaxDiagnostics bounds the diagnostics a refusal keeps, in the status
// (/status and /summary, polled every few seconds) and its log line, as
// the admin API's refusals are bounded.
const MaxDiagnostics = 1000

// Options are a pipeline's stages, given at construction: what reads the
// files a config names, what publishes a good fleet, and who is told.
type Options struct {
	// Registry is the resource types fleets are compiled with. Required.
	Registry *xdstype.Registry
	// Read reads the files a config names (certificates, keys): serve
	// passes a secretfile.Reader's Read so that only the secret
	// directories can be read. Nil: compile.LimitedReader, any path.
	Read compile.ReadFile
	// Publish publishes a good fleet, or refuses it with an error that
	// the pipeline reports like an invalid config: the rollout
	// controller stages it (rollout.Controller.Publish) and refuses a
	// change while a rollout is halted. PublishTo publishes straight to
	// a publisher. Required.
	Publish Publish
	// OnResult, if set, is told each load's result ("published",
	// "unchanged", "refused") and, when published, the fleet.
	OnResult func(result string, f *fleet.Fleet)
	// OnFiles, if set, is told after each good compile the files the
	// config read (certificates, keys), so that a source watches them.
	OnFiles func(paths []string)
	// Retry, when it receives, makes Run apply the last update again, as
	// when what refused it changed (a halted rollout superseded). Nil:
	// never.
	Retry  <-chan struct{}
	Logger *slog.Logger
	// Groups are the node groups this replica serves (`pylon serve
	// --groups`; nil: all): compile builds only theirs (compile.Cache).
	Groups fleet.Selector
}

// Publish is the pipeline's publish stage: it makes a good fleet current,
// reporting whether that changed what is served, or refuses it.
type Publish func(f *fleet.Fleet, files []config.File) (published bool, err error)

// PublishTo is the publish stage of a pipeline without rollouts: pub
// publishes every good fleet as it is.
func PublishTo(pub *fleet.Publisher) Publish {
	return func(f *fleet.Fleet, _ []config.File) (bool, error) { return pub.Publish(f), nil }
}

// Pipeline publishes updates from a source.
type Pipeline struct {
	o Options
	// compiled carries what one compile leaves for the next (resources
	// already validated).
	compiled compile.Cache
	last     *source.Update // what Run applied last, applied again on Retry
	// applying makes Applies one at a time, so that good is what the
	// fleet published last read (concurrent ones would publish in one
	// order and record in another).
	applying sync.Mutex

	mu     sync.Mutex
	status Status
	// good is what the last update compiled and published read, nil
	// after a refusal: an update that reads the same is not compiled
	// again (see unchanged).
	good *inputs
}

// New returns a pipeline of o's stages. It panics without a Registry or a
// Publish: a pipeline that cannot compile or publish is a wiring mistake.
func New(o Options) *Pipeline {
	if o.Registry == nil || o.Publish == nil {
		panic("pipeline.New: Options.Registry and Options.Publish are required")
	}
	if o.Read == nil {
		o.Read = compile.LimitedReader
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	p := &Pipeline{o: o}
	p.compiled.Groups = o.Groups
	return p
}

// Cache is the compile cache the pipeline compiles through, for the
// config store to validate writes through (configstore.Options.Cache):
// the publish that follows a write then finds what the write decoded.
func (p *Pipeline) Cache() *compile.Cache { return &p.compiled }

func (p *Pipeline) result(r string, f *fleet.Fleet) {
	if p.o.OnResult != nil {
		p.o.OnResult(r, f)
	}
}

// Run applies updates until ctx ends or in closes.
func (p *Pipeline) Run(ctx context.Context, in <-chan source.Update) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case u, ok := <-in:
			if !ok {
				return nil
			}
			p.last = &u
			_ = p.Apply(u)
		case <-p.o.Retry:
			if p.last != nil {
				_ = p.apply(*p.last, true)
			}
		}
	}
}

// Apply compiles and publishes one update. It returns the refusal's error,
// or nil when the update was published or changed nothing. An update of
// the same files as the last good one, whose named files (certificates)
// read the same too, is not compiled again (a resync of a large config
// would allocate several times its size every 30 s); any other is, even
// one whose files did not change. Unchanged content publishes nothing
// (the fleet's version is a hash of content), and a refusal repeated by a
// resync is logged once.
func (p *Pipeline) Apply(u source.Update) error { return p.apply(u, false) }

// apply is Apply; again compiles u even if it reads as the last good
// update did (a retry: what refused it may have changed).
func (p *Pipeline) apply(u source.Update, again bool) error {
	p.applying.Lock()
	defer p.applying.Unlock()
	in := config.Digest(u.Files)
	if u.Err == nil && !again && p.unchanged(in) {
		p.mu.Lock()
		p.status.Revision = u.Revision // unchanged content at a new revision is that revision's config
		p.mu.Unlock()
		p.o.Logger.Debug("config unchanged: not compiled again", "version", p.Status().Version)
		p.result("unchanged", nil)
		return nil
	}
	var paths []string
	good := &inputs{files: in, read: map[string][sha256.Size]byte{}}
	reader := func(path string) ([]byte, error) {
		paths = append(paths, path)
		b, err := p.o.Read(path)
		good.note(path, b, err)
		return b, err
	}
	err := u.Err
	var built *fleet.Fleet
	var warnings diag.List
	if err == nil {
		built, warnings, err = p.compile(u.Files, reader)
	}
	now := time.Now()
	if err != nil {
		return p.refuse(err, u.Revision, now)
	}
	if p.o.OnFiles != nil {
		p.o.OnFiles(paths)
	}
	built.AcceptedAt = u.AcceptedAt
	published, err := p.o.Publish(built, u.Files)
	if err != nil {
		return p.refuse(err, u.Revision, now)
	}
	p.mu.Lock()
	p.good = good
	if p.status.Refused != nil && !published {
		p.o.Logger.Info("config restored to the version being served", "version", built.Version())
	}
	p.status.Refused = nil
	p.status.Warnings, p.status.WarningsTotal = FirstWarnings(warnings)
	// Unchanged content at a new revision is that revision's config.
	p.status.Revision = u.Revision
	if published || p.status.Version == "" {
		p.status.Version = built.Version()
		p.status.AcceptedAt = u.AcceptedAt
		p.status.PublishedAt = now
		p.status.Groups = p.status.Groups[:0]
		for _, g := range built.Groups() {
			gs := GroupStatus{Name: g.Name, Version: g.Snapshot.Version(), Resources: map[string]int{}}
			for _, set := range g.Snapshot.Sets() {
				if set.Len() > 0 {
					gs.Resources[set.Type().Kind] = set.Len()
				}
			}
			p.status.Groups = append(p.status.Groups, gs)
		}
	}
	p.mu.Unlock()
	if published {
		p.o.Logger.Info("config published", append(revision(u.Revision), "version", built.Version(), "groups", len(built.Groups()), "latency", now.Sub(u.AcceptedAt).String())...)
		logWarnings(p.o.Logger, built.Version(), warnings)
		p.result("published", built)
	} else {
		p.o.Logger.Debug("config unchanged", "version", built.Version())
		p.result("unchanged", nil)
	}
	return nil
}

// FirstWarnings are the first MaxWarnings of warnings, and how many there
// are in all (0 for none).
func FirstWarnings(warnings diag.List) (diag.List, int) {
	if len(warnings) > MaxWarnings {
		return slices.Clone(warnings[:MaxWarnings]), len(warnings) // not the whole list's array
	}
	return warnings, len(warnings)
}

// loggedWarnings bounds the warnings a publish logs one by one; the status
// has more (MaxWarnings) and their count.
const loggedWarnings = 10

// logWarnings logs a published config's warnings (redacted, as a
// diagnostic renders itself), the first few one by one.
func logWarnings(log *slog.Logger, version string, warnings diag.List) {
	for i, w := range warnings {
		if i == loggedWarnings {
			log.Warn("more config warnings: see pylon status", "version", version, "more", len(warnings)-i)
			return
		}
		log.Warn("config warning", "version", version, "warning", w.String())
	}
}

// revision is the log attribute naming a source's revision, if any.
func revision(rev string) []any {
	if rev == "" {
		return nil
	}
	return []any{"revision", rev}
}

// refuse records and logs a refused change (once while it repeats), at
// its source's revision rev.
func (p *Pipeline) refuse(err error, rev string, now time.Time) error {
	// A diag list renders itself redacted; any other error (a source's
	// read error, a reader's) may quote a file's content and is
	// scrubbed of key material here.
	var dl diag.List
	total := 0
	if errors.As(err, &dl) && len(dl) > MaxDiagnostics {
		dl, total = dl[:MaxDiagnostics:MaxDiagnostics], len(dl)
		err = fmt.Errorf("%w\n  ... and %d more", dl, total-MaxDiagnostics)
	}
	msg := redact.String(err.Error())
	p.mu.Lock()
	p.good = nil
	repeat := p.status.Refused != nil && p.status.Refused.Error == msg && p.status.Refused.Revision == rev
	if !repeat {
		p.status.Refused = &Refusal{At: now, Revision: rev, Error: msg, Diagnostics: dl, DiagnosticsTotal: total}
	}
	p.mu.Unlock()
	if !repeat {
		p.o.Logger.Error("config refused; the previous config keeps serving", append(revision(rev), "err", msg)...)
	}
	p.result("refused", nil)
	return err
}

// Status returns a copy of the pipeline's status.
func (p *Pipeline) Status() Status {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.status
	s.Groups = make([]GroupStatus, len(p.status.Groups))
	for i, g := range p.status.Groups {
		g.Resources = maps.Clone(g.Resources)
		s.Groups[i] = g
	}
	return s
}
