// Package pipeline is the reconcile loop: every update from a source is
// decoded, validated and built into a snapshot, then published, or refused
// as a whole with diagnostics while the last good snapshot keeps serving.
package pipeline

import (
	"context"
	"errors"
	"log/slog"
	"maps"
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
	Version     string        `json:"version"`
	AcceptedAt  time.Time     `json:"acceptedAt,omitzero"`
	PublishedAt time.Time     `json:"publishedAt,omitzero"`
	Groups      []GroupStatus `json:"groups"`
	// Refused is the last refused change, cleared when a good one lands.
	Refused *Refusal `json:"refused,omitempty"`
}

// GroupStatus is one node group's snapshot.
type GroupStatus struct {
	Name      string         `json:"name"`
	Version   string         `json:"version"`
	Resources map[string]int `json:"resources"`
}

// Refusal is a change that was not published.
type Refusal struct {
	At          time.Time         `json:"at"`
	Error       string            `json:"error"`
	Diagnostics []diag.Diagnostic `json:"diagnostics,omitempty"`
}

// Pipeline publishes updates from a source.
type Pipeline struct {
	// compiled carries what one compile leaves for the next (resources
	// already validated); safe for concurrent Applies.
	compiled compile.Cache
	reg      *xdstype.Registry
	pub      *fleet.Publisher
	log      *slog.Logger
	// onFiles is told, after each good compile, the files the config named
	// (certificates), so that the source watches them too.
	onFiles func([]string)
	files   []string // what the last good compile read
	// onResult, if set, is told each load's result ("published",
	// "unchanged", "refused") and, when published, the fleet.
	onResult func(result string, f *fleet.Fleet)
	// read reads the files the config names; compile.LimitedReader unless
	// SetReader confines it.
	read compile.ReadFile
	// publish publishes a good fleet (the publisher's Publish unless
	// SetPublish replaced it); an error refuses the change.
	publish func(*fleet.Fleet, []config.File) (bool, error)
	// retry asks Run to apply the last update again (Retry); last is it.
	retry chan struct{}
	last  *source.Update

	mu     sync.Mutex
	status Status
}

// New returns a pipeline publishing to pub.
func New(reg *xdstype.Registry, pub *fleet.Publisher, log *slog.Logger) *Pipeline {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Pipeline{reg: reg, pub: pub, log: log, read: compile.LimitedReader, retry: make(chan struct{}, 1)}
	p.publish = func(f *fleet.Fleet, _ []config.File) (bool, error) { return pub.Publish(f), nil }
	return p
}

// SetPublish replaces how a good fleet is published: the rollout
// controller stages it (rollout.Controller.Publish), and may refuse it
// (a change while a rollout is halted), which the pipeline reports like
// an invalid config. Call before Run.
func (p *Pipeline) SetPublish(f func(*fleet.Fleet, []config.File) (bool, error)) { p.publish = f }

// Retry makes Run apply the last update again, as when what refused it
// changed (a halted rollout superseded). It never blocks.
func (p *Pipeline) Retry() {
	select {
	case p.retry <- struct{}{}:
	default:
	}
}

// SetReader sets how the pipeline reads the files a config names
// (certificates, keys): serve passes a secretfile.Reader's Read so that
// only the secret directories can be read. The default,
// compile.LimitedReader, reads any path. Call before Run.
func (p *Pipeline) SetReader(read compile.ReadFile) {
	if read != nil {
		p.read = read
	}
}

// OnFiles sets the function told which files (certificates, keys) the
// current config reads, to watch them, and tells it at once about the files
// read so far. Call before Run.
func (p *Pipeline) OnFiles(f func([]string)) {
	p.onFiles = f
	f(p.files)
}

// OnResult sets the function told each load's result. Call before Run.
func (p *Pipeline) OnResult(f func(result string, fleet *fleet.Fleet)) { p.onResult = f }

func (p *Pipeline) result(r string, f *fleet.Fleet) {
	if p.onResult != nil {
		p.onResult(r, f)
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
		case <-p.retry:
			if p.last != nil {
				_ = p.Apply(*p.last)
			}
		}
	}
}

// Apply compiles and publishes one update. It returns the refusal's error,
// or nil when the update was published or changed nothing. Every update is
// compiled, even one whose files did not change: the certificates it names
// may have. Unchanged content publishes nothing (the fleet's version is a
// hash of content), and a refusal repeated by a resync is logged once.
func (p *Pipeline) Apply(u source.Update) error {
	var read []string
	reader := func(path string) ([]byte, error) {
		read = append(read, path)
		return p.read(path)
	}
	err := u.Err
	var fleet *fleet.Fleet
	if err == nil {
		fleet, err = p.compiled.Compile(p.reg, u.Files, reader)
	}
	now := time.Now()
	if err != nil {
		return p.refuse(err, now)
	}
	p.files = read
	if p.onFiles != nil {
		p.onFiles(read)
	}
	fleet.AcceptedAt = u.AcceptedAt
	published, err := p.publish(fleet, u.Files)
	if err != nil {
		return p.refuse(err, now)
	}
	p.mu.Lock()
	if p.status.Refused != nil && !published {
		p.log.Info("config restored to the version being served", "version", fleet.Version())
	}
	p.status.Refused = nil
	if published || p.status.Version == "" {
		p.status.Version = fleet.Version()
		p.status.AcceptedAt = u.AcceptedAt
		p.status.PublishedAt = now
		p.status.Groups = p.status.Groups[:0]
		for _, g := range fleet.Groups() {
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
		p.log.Info("config published", "version", fleet.Version(), "groups", len(fleet.Groups()), "latency", now.Sub(u.AcceptedAt).String())
		p.result("published", fleet)
	} else {
		p.log.Debug("config unchanged", "version", fleet.Version())
		p.result("unchanged", nil)
	}
	return nil
}

// refuse records and logs a refused change (once while it repeats).
func (p *Pipeline) refuse(err error, now time.Time) error {
	// A diag list renders itself redacted; any other error (a source's
	// read error, a reader's) may quote a file's content and is
	// scrubbed of key material here.
	msg := redact.String(err.Error())
	p.mu.Lock()
	repeat := p.status.Refused != nil && p.status.Refused.Error == msg
	if !repeat {
		r := &Refusal{At: now, Error: msg}
		var dl diag.List
		if errors.As(err, &dl) {
			r.Diagnostics = dl
		}
		p.status.Refused = r
	}
	p.mu.Unlock()
	if !repeat {
		p.log.Error("config refused; the previous config keeps serving", "err", msg)
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
