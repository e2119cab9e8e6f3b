// Package pipeline is the reconcile loop: every update from a source is
// decoded, validated and built into a snapshot, then published, or refused
// as a whole with diagnostics while the last good snapshot keeps serving.
package pipeline

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/pylon-xds/pylon/internal/compile"
	"github.com/pylon-xds/pylon/internal/diag"
	"github.com/pylon-xds/pylon/internal/snapshot"
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
	reg *xdstype.Registry
	pub *snapshot.Publisher
	log *slog.Logger

	mu     sync.Mutex
	status Status
	// goodInput and badInput hash the last published and the last refused
	// input, so that a resync or a repeated event re-reading the same bytes
	// neither rebuilds nor logs again.
	goodInput, badInput string
}

// New returns a pipeline publishing to pub.
func New(reg *xdstype.Registry, pub *snapshot.Publisher, log *slog.Logger) *Pipeline {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Pipeline{reg: reg, pub: pub, log: log}
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
			_ = p.Apply(u)
		}
	}
}

// Apply compiles and publishes one update. It returns the refusal's error,
// or nil when the update was published or changed nothing.
func (p *Pipeline) Apply(u source.Update) error {
	key := inputKey(u)
	p.mu.Lock()
	good, bad := key == p.goodInput, key == p.badInput
	var refused string
	if bad && p.status.Refused != nil {
		refused = p.status.Refused.Error
	}
	if good && p.status.Refused != nil {
		// The input went back to what is being served: nothing to
		// publish, and the refusal no longer describes the source.
		p.status.Refused, p.badInput = nil, ""
		p.log.Info("config restored to the version being served", "version", p.status.Version)
	}
	p.mu.Unlock()
	switch {
	case good:
		return nil
	case bad:
		return errors.New(refused)
	}

	err := u.Err
	var fleet *snapshot.Fleet
	if err == nil {
		fleet, err = compile.Compile(p.reg, u.Files)
	}
	now := time.Now()
	if err != nil {
		r := &Refusal{At: now, Error: err.Error()}
		var dl diag.List
		if errors.As(err, &dl) {
			r.Diagnostics = dl
		}
		p.mu.Lock()
		p.badInput = key
		p.status.Refused = r
		p.mu.Unlock()
		// Logged once per distinct bad input: a resync of the same bytes
		// is caught by badInput above.
		p.log.Error("config refused; the previous config keeps serving", "err", err.Error())
		return err
	}
	fleet.AcceptedAt = u.AcceptedAt
	published := p.pub.Publish(fleet)
	p.mu.Lock()
	p.goodInput, p.badInput = key, ""
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
	} else {
		p.log.Debug("config unchanged", "version", fleet.Version())
	}
	return nil
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

// inputKey hashes an update's files (or read error) so identical inputs are
// recognised without decoding them.
func inputKey(u source.Update) string {
	h := sha256.New()
	if u.Err != nil {
		h.Write([]byte("error\x00" + u.Err.Error()))
	}
	for _, f := range u.Files {
		h.Write([]byte(f.Path))
		h.Write([]byte{0})
		var n [8]byte
		for i := range n {
			n[i] = byte(len(f.Data) >> (8 * i))
		}
		h.Write(n[:])
		h.Write(f.Data)
	}
	return hex.EncodeToString(h.Sum(nil))
}
