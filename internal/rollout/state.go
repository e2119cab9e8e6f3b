package rollout

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/seal"
)

// maxLate bounds the responses awaiting an ACK tracked per rollout.
const maxLate = 100_000

type lateKey struct {
	stream uint64
	typ    string
}

type lateEntry struct {
	node string
	at   time.Time
}

// lateness tracks the responses of the new version sent to the stage's
// nodes and not ACKed yet, by stream then type: a stream that ends drops
// its entries at once, however many others are pending.
type lateness struct {
	pending map[uint64]map[string]lateEntry
	n       int
	// full is set once an entry was not tracked for the bound: the
	// not_acked condition then sees only part of the stage.
	full bool
}

// sent tracks a response; it reports true the first time the bound makes
// it leave one out, for the caller to say so.
func (l *lateness) sent(k lateKey, node string, at time.Time) (overflowed bool) {
	if _, ok := l.pending[k.stream][k.typ]; ok {
		return false
	}
	if l.n >= maxLate {
		overflowed, l.full = !l.full, true
		return overflowed
	}
	if l.pending == nil {
		l.pending = map[uint64]map[string]lateEntry{}
	}
	if l.pending[k.stream] == nil {
		l.pending[k.stream] = map[string]lateEntry{}
	}
	l.pending[k.stream][k.typ] = lateEntry{node: node, at: at}
	l.n++
	return false
}

func (l *lateness) acked(k lateKey) {
	byType := l.pending[k.stream]
	if _, ok := byType[k.typ]; !ok {
		return
	}
	delete(byType, k.typ)
	l.n--
	if len(byType) == 0 {
		delete(l.pending, k.stream)
	}
}

// closed forgets a stream that ended: its node reconnects and is sent
// the version again, or is gone.
func (l *lateness) closed(stream uint64) {
	l.n -= len(l.pending[stream])
	delete(l.pending, stream)
}

// each calls fn for every pending response.
func (l *lateness) each(fn func(lateEntry)) {
	for _, byType := range l.pending {
		for _, e := range byType {
			fn(e)
		}
	}
}

// count returns how many distinct nodes have a response older than within
// not ACKed, and one of them.
func (l *lateness) count(now time.Time, within time.Duration) (int, string) {
	nodes := map[string]bool{}
	example := ""
	l.each(func(e lateEntry) {
		if !now.Before(e.at.Add(within)) {
			nodes[e.node] = true
			if example == "" || e.node < example {
				example = e.node
			}
		}
	})
	return len(nodes), example
}

// due is when the oldest pending response becomes late; zero for none.
func (l *lateness) due(within time.Duration) time.Time {
	var t time.Time
	l.each(func(e lateEntry) {
		if d := e.at.Add(within); t.IsZero() || d.Before(t) {
			t = d
		}
	})
	return t
}

// state is what StatePath holds: the rollouts, and the config files of
// their previous versions (by content hash), to compile them again on
// start. It holds config, private keys included, as the store does: the
// file is written 0600, and sealed whole (package seal) with Options.Seal.
type state struct {
	// Format is the layout's version: a newer one is refused rather than
	// half read.
	Format   int      `json:"format"`
	Rollouts []Status `json:"rollouts"`
	// Files are the saved configs by filesKey, each a JSON list of
	// savedFile: kept encoded, so that a publish while a rollout runs
	// does not encode a config that cannot change (Controller.encoded).
	Files map[string]json.RawMessage `json:"files,omitempty"`
}

// files decodes the saved config of key.
func (st *state) files(key string) ([]config.File, error) {
	var saved []savedFile
	if err := json.Unmarshal(st.Files[key], &saved); err != nil {
		return nil, err
	}
	return configFiles(saved), nil
}

// savedFile is a config file as the state keeps it: with whether the
// source that rendered it bounds it (config.File.SourceBounded), which
// config.File does not encode, so that no writer of the store or the API
// can claim it. The state is Pylon's own, written 0600 and sealed; read
// back without it, a large cluster's files would count against the own
// files' limit and the saved config would no longer compile.
type savedFile struct {
	config.File
	Bounded bool `json:"bounded,omitempty"`
}

func savedFiles(files []config.File) []savedFile {
	out := make([]savedFile, len(files))
	for i, f := range files {
		out[i] = savedFile{File: f, Bounded: f.SourceBounded}
	}
	return out
}

func configFiles(saved []savedFile) []config.File {
	out := make([]config.File, len(saved))
	for i, f := range saved {
		out[i] = f.File
		out[i].SourceBounded = f.Bounded
	}
	return out
}

// stateFormat is the layout this code writes. Format 0 (before the field)
// has the same fields, but its From and To are snapshot versions,
// endpoints included, where format 1 has config versions: resume
// translates them.
const stateFormat = 1

// maxSavedRollouts bounds the rollouts a state file may hold: one per
// group at most.
const maxSavedRollouts = 10_000

// maxStateBytes bounds the state file read on start, and so the state
// written: room for a few saved configs of the own files' limit and what
// a source renders beside them (a cluster's services and endpoints).
const maxStateBytes = 8*config.MaxTotalBytes + 1<<20

// sealRoom is what sealing adds to the state (a header naming the key, a
// nonce and a tag), and more: a state is written only if it fits
// maxStateBytes - sealRoom.
const sealRoom = 4 << 10

// stateContext is the additional data the state file is sealed with.
const stateContext = "rollout state"

// load reads the state file, opening it with ring when sealed. A file in
// clear or sealed under an older key is written again at once, sealed
// under ring's first key: a new key applies to it from the start, not
// from the next change of a rollout.
func load(path string, ring *seal.Keyring) (*state, error) {
	if path == "" {
		return nil, nil
	}
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("rollout state: %w", err)
	}
	if fi.Size() > maxStateBytes {
		return nil, fmt.Errorf("rollout state %s: %d bytes, over the %d limit", path, fi.Size(), maxStateBytes)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("rollout state: %w", err)
	}
	b, err := ring.Open(stateContext, raw)
	if err != nil {
		return nil, fmt.Errorf("rollout state %s: %w", path, err)
	}
	var st state
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("rollout state %s: %w%s", path, err, removeAdvice)
	}
	if err := st.check(); err != nil {
		return nil, fmt.Errorf("rollout state %s: %w%s", path, err, removeAdvice)
	}
	if !ring.Current(raw) {
		if err := writeFile(path, ring.Seal(stateContext, b)); err != nil {
			return nil, fmt.Errorf("rollout state %s: sealing it under key %q: %w", path, ring.Primary(), err)
		}
	}
	return &st, nil
}

// removeAdvice says what removing a state file Pylon cannot read does.
const removeAdvice = " (removing the file starts without the saved rollouts: every node then gets the current config, a halted change included)"

// check refuses a state no Pylon wrote: a newer format, or values out of
// their range, which would otherwise fail later, inside the rollouts.
func (st *state) check() error {
	if st.Format > stateFormat {
		return fmt.Errorf("format %d, written by a newer Pylon (this one reads up to %d)", st.Format, stateFormat)
	}
	if len(st.Rollouts) > maxSavedRollouts {
		return fmt.Errorf("%d rollouts, over the limit of %d", len(st.Rollouts), maxSavedRollouts)
	}
	for i, s := range st.Rollouts {
		field := fmt.Sprintf("rollouts[%d]", i)
		switch {
		case s.Group == "":
			return fmt.Errorf("%s.group is empty", field)
		case s.Stage < 0 || s.Stage > config.MaxRolloutStages:
			return fmt.Errorf("%s.stage is %d; it must be between 0 and %d", field, s.Stage, config.MaxRolloutStages)
		case s.HaltedStage < 0 || s.HaltedStage > config.MaxRolloutStages:
			return fmt.Errorf("%s.haltedStage is %d; it must be between 0 and %d", field, s.HaltedStage, config.MaxRolloutStages)
		case s.Halted != "" && s.Halted != ReasonNACK && s.Halted != ReasonNotACKed && s.Halted != ReasonOperator:
			return fmt.Errorf("%s.halted is %q; it must be %s, %s or %s", field, s.Halted, ReasonNACK, ReasonNotACKed, ReasonOperator)
		case st.Files[s.FromFiles] == nil:
			return fmt.Errorf("%s.fromFiles names no saved config", field)
		}
	}
	for k := range st.Files {
		if _, err := st.files(k); err != nil {
			return fmt.Errorf("files[%q]: %v", k, err)
		}
	}
	return nil
}

// stagedState is the rollouts' state to write: its encoding, or nil to
// remove the file (no rollout left), or err if it could not be encoded.
type stagedState struct {
	b   []byte
	err error
}

// save stages the rollouts' state for flush, with mu held: encoded here,
// written once mu is released.
func (c *Controller) save() {
	if c.o.StatePath == "" {
		return
	}
	st := &stagedState{}
	if len(c.runs) > 0 {
		st.b, st.err = c.encodeState()
	}
	c.staged.Store(st)
}

// flush writes the newest staged state to StatePath (atomically: a
// temporary file renamed), or removes it when there are no rollouts. It
// runs without mu; saveMu orders the writes, and each takes the newest
// state staged, so an older one is never written over a newer. A failure
// is logged: the rollouts go on, and a restart would not resume them.
func (c *Controller) flush() {
	c.saveMu.Lock()
	defer c.saveMu.Unlock()
	st := c.staged.Swap(nil)
	switch {
	case st == nil:
	case st.err == nil && st.b == nil:
		c.written = [sha256.Size]byte{}
		if err := os.Remove(c.o.StatePath); err != nil && !errors.Is(err, fs.ErrNotExist) {
			c.o.Logger.Error("rollout state not removed", "path", c.o.StatePath, "err", err)
		}
	case st.err == nil && sha256.Sum256(st.b) == c.written:
		// The state on disk already: a publish of endpoints alone while
		// a rollout runs changes nothing of it, and need not rewrite
		// (and sync) a file of whole configs.
	default:
		err := st.err
		c.written = [sha256.Size]byte{}
		if err == nil {
			if err = writeFile(c.o.StatePath, c.o.Seal.Seal(stateContext, st.b)); err == nil {
				c.written = sha256.Sum256(st.b)
			}
		}
		if err != nil {
			// The state on disk is older: resumed, it would stage changes
			// that have moved on since.
			rmErr := os.Remove(c.o.StatePath)
			if errors.Is(rmErr, fs.ErrNotExist) {
				rmErr = nil
			}
			c.o.Logger.Error("rollout state not saved, and the older one removed: a restart would not resume the rollouts", "path", c.o.StatePath, "err", err, "remove_err", rmErr)
		}
	}
}

// encodeState encodes the rollouts in progress, with mu held.
func (c *Controller) encodeState() ([]byte, error) {
	st := state{Format: stateFormat, Files: map[string]json.RawMessage{}}
	for _, n := range c.names() {
		r := c.runs[n]
		if r.FromFiles == "" {
			// Once a run: its saved config does not change while it
			// runs, and the state is encoded every publish.
			r.FromFiles = filesKey(r.files)
		}
		st.Rollouts = append(st.Rollouts, r.Status)
		if st.Files[r.FromFiles] != nil {
			continue
		}
		enc := c.encoded[r.FromFiles]
		if enc == nil {
			var err error
			if enc, err = json.Marshal(savedFiles(r.files)); err != nil {
				return nil, err
			}
		}
		st.Files[r.FromFiles] = enc
	}
	// Kept for the next state: the saved configs of running rollouts
	// do not change while they run.
	c.encoded = st.Files
	b, err := json.Marshal(st)
	if err == nil && len(b) > c.maxState {
		// Written, a start would refuse it.
		return nil, fmt.Errorf("the state is %d bytes, over the %d-byte limit", len(b), c.maxState)
	}
	return b, err
}

func writeFile(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".rollouts-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	// On disk before the rename: a crash must leave the old state or
	// the new, never an empty file.
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// filesKey names a saved config in the state: its digest, which tells
// apart configs that load differently (a source's bound included).
func filesKey(files []config.File) string {
	d := config.Digest(files)
	return hex.EncodeToString(d[:12])
}

// resume takes the saved rollouts on the first fleet: each group's
// previous version is compiled again from its saved config. A group
// whose change is still the one being rolled out resumes at its saved
// stage and bake; one changed while Pylon was down starts a new rollout
// from the saved previous version.
func (c *Controller) resume(f *fleet.Fleet) {
	for _, s := range c.saved.Rollouts {
		g, rule := f.Lookup(s.Group)
		if g == nil || rule.Rollout == nil || c.o.Compile == nil {
			continue
		}
		files, err := c.saved.files(s.FromFiles)
		var old *fleet.Fleet
		if err == nil {
			old, err = c.o.Compile(files)
		}
		var prev *fleet.Group
		if err == nil {
			prev, _ = old.Lookup(s.Group)
		}
		if c.saved.Format == 0 {
			s.From, s.To = configVersion(prev, s.From), configVersion(g, s.To)
		}
		switch {
		case prev == nil:
			c.o.Logger.Error("saved rollout cannot be resumed: its previous config no longer compiles; every node of the group gets the current config",
				"group", s.Group, "halted", s.Halted, "err", err)
			continue
		case prev.Snapshot.ConfigVersion() != s.From:
			// A file it names (a certificate) changed while Pylon was
			// stopped, or Pylon itself: the previous config is still the
			// one the nodes outside the stage ran, now compiled anew. The
			// rollout goes on from it; a halted one stays halted.
			c.o.Logger.Warn("saved rollout resumed from its previous config compiled again to another version (a file it names, or Pylon, changed while stopped)",
				"group", s.Group, "saved_from", s.From, "from", prev.Snapshot.ConfigVersion(), "halted", s.Halted)
			s.From = prev.Snapshot.ConfigVersion()
		}
		r := &run{Status: s, prev: prev.Snapshot, next: g.Snapshot, policy: rule.Rollout, files: files}
		r.Stages = len(rule.Rollout.Stages)
		c.runs[s.Group] = r
		if g.Snapshot.ConfigVersion() == s.To && s.Stage <= r.Stages && s.HaltedStage <= r.Stages {
			c.o.Logger.Info("rollout resumed after a restart", "group", s.Group, "stage", s.Stage, "halted", s.Halted, "version", s.To)
			c.report(s.Group, s.Stage)
			continue
		}
		c.o.Logger.Warn("the group changed while Pylon was stopped: a new rollout starts from the saved previous version", "group", s.Group, "from", s.From, "to", g.Snapshot.ConfigVersion(), "was_halted", s.Halted)
		r.Status = Status{Group: s.Group, From: s.From, To: g.Snapshot.ConfigVersion(), Stages: r.Stages}
		c.enter(r, 1, c.o.Now())
	}
}

// configVersion is g's config version when v, a format-0 state file's,
// is g's snapshot version; else v.
func configVersion(g *fleet.Group, v string) string {
	if g != nil && g.Snapshot.Version() == v {
		return g.Snapshot.ConfigVersion()
	}
	return v
}
