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
	"github.com/pylon-xds/pylon/internal/snapshot"
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
// nodes and not ACKed yet.
type lateness struct{ pending map[lateKey]lateEntry }

func (l *lateness) sent(k lateKey, node string, at time.Time) {
	if l.pending == nil {
		l.pending = map[lateKey]lateEntry{}
	}
	if _, ok := l.pending[k]; !ok && len(l.pending) < maxLate {
		l.pending[k] = lateEntry{node: node, at: at}
	}
}

func (l *lateness) acked(k lateKey) { delete(l.pending, k) }

// closed forgets a stream that ended: its node reconnects and is sent
// the version again, or is gone.
func (l *lateness) closed(stream uint64) {
	for k := range l.pending {
		if k.stream == stream {
			delete(l.pending, k)
		}
	}
}

// count returns how many distinct nodes have a response older than within
// not ACKed, and one of them.
func (l *lateness) count(now time.Time, within time.Duration) (int, string) {
	nodes := map[string]bool{}
	example := ""
	for _, e := range l.pending {
		if !now.Before(e.at.Add(within)) {
			nodes[e.node] = true
			if example == "" || e.node < example {
				example = e.node
			}
		}
	}
	return len(nodes), example
}

// due is when the oldest pending response becomes late; zero for none.
func (l *lateness) due(within time.Duration) time.Time {
	var t time.Time
	for _, e := range l.pending {
		if d := e.at.Add(within); t.IsZero() || d.Before(t) {
			t = d
		}
	}
	return t
}

// state is what StatePath holds: the rollouts, and the config files of
// their previous versions (by content hash), to compile them again on
// start. It holds config, as the store does: the file is written 0600.
type state struct {
	Rollouts []Status                 `json:"rollouts"`
	Files    map[string][]config.File `json:"files,omitempty"`
}

// maxStateBytes bounds the state file read on start.
const maxStateBytes = 4*config.MaxTotalBytes + 1<<20

func load(path string) (*state, error) {
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
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("rollout state: %w", err)
	}
	var st state
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("rollout state %s: %w (remove the file to start without the saved rollouts)", path, err)
	}
	return &st, nil
}

// save writes the rollouts to StatePath (atomically: a temporary file
// renamed), or removes it when there are none. A failure is logged: the
// rollouts go on, and a restart would not resume them.
func (c *Controller) save() {
	if c.o.StatePath == "" {
		return
	}
	if len(c.runs) == 0 {
		if err := os.Remove(c.o.StatePath); err != nil && !errors.Is(err, fs.ErrNotExist) {
			c.o.Logger.Error("rollout state not removed", "path", c.o.StatePath, "err", err)
		}
		return
	}
	st := state{Files: map[string][]config.File{}}
	for _, n := range c.names() {
		r := c.runs[n]
		r.FromFiles = filesKey(r.files)
		st.Files[r.FromFiles] = r.files
		st.Rollouts = append(st.Rollouts, r.Status)
	}
	b, err := json.Marshal(st)
	if err == nil {
		err = writeFile(c.o.StatePath, b)
	}
	if err != nil {
		c.o.Logger.Error("rollout state not saved: a restart would not resume the rollouts", "path", c.o.StatePath, "err", err)
	}
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
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func filesKey(files []config.File) string {
	h := sha256.New()
	for _, f := range files {
		fmt.Fprintf(h, "%d:%s%d:%s%d:", len(f.Path), f.Path, len(f.Dir), f.Dir, len(f.Data))
		h.Write(f.Data)
	}
	return hex.EncodeToString(h.Sum(nil)[:12])
}

// resume takes the saved rollouts on the first fleet: each group's
// previous version is compiled again from its saved config. A group
// whose change is still the one being rolled out resumes at its saved
// stage and bake; one changed while Pylon was down starts a new rollout
// from the saved previous version.
func (c *Controller) resume(f *snapshot.Fleet) {
	for _, s := range c.saved.Rollouts {
		g, rule := f.Lookup(s.Group)
		if g == nil || rule.Rollout == nil || c.o.Compile == nil {
			continue
		}
		files := c.saved.Files[s.FromFiles]
		old, err := c.o.Compile(files)
		var prev *snapshot.Group
		if err == nil {
			prev, _ = old.Lookup(s.Group)
		}
		if prev == nil || prev.Snapshot.Version() != s.From {
			c.o.Logger.Warn("saved rollout not resumed: its previous version does not compile to the same snapshot", "group", s.Group, "err", err)
			continue
		}
		r := &run{Status: s, prev: prev.Snapshot, next: g.Snapshot, policy: rule.Rollout, files: files}
		r.Stages = len(rule.Rollout.Stages)
		c.runs[s.Group] = r
		if g.Snapshot.Version() == s.To && s.Stage <= r.Stages && s.HaltedStage <= r.Stages {
			c.o.Logger.Info("rollout resumed after a restart", "group", s.Group, "stage", s.Stage, "halted", s.Halted, "version", s.To)
			c.report(s.Group, s.Stage)
			continue
		}
		c.o.Logger.Warn("the group changed while Pylon was stopped: a new rollout starts from the saved previous version", "group", s.Group, "from", s.From, "to", g.Snapshot.Version(), "was_halted", s.Halted)
		r.Status = Status{Group: s.Group, From: s.From, To: g.Snapshot.Version(), Stages: r.Stages}
		c.enter(r, 1, c.o.Now())
	}
}
