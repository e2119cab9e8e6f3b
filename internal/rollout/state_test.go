package rollout

import (
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/nodegroup"
	"github.com/pylon-xds/pylon/internal/status"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// A state file no Pylon wrote (values out of range, a newer format, a
// rollout naming no saved config) is refused at start with the file and
// the field named, rather than failing inside the rollouts later.
func TestStateFileChecked(t *testing.T) {
	cases := map[string]string{
		`{"rollouts":[{"group":"edge","stage":-3,"fromFiles":"k"}],"files":{"k":[{"Path":"c.yaml"}]}}`:       "rollouts[0].stage is -3",
		`{"rollouts":[{"group":"edge","haltedStage":99,"fromFiles":"k"}],"files":{"k":[{"Path":"c.yaml"}]}}`: "rollouts[0].haltedStage is 99",
		`{"rollouts":[{"group":"edge","halted":"bored","fromFiles":"k"}],"files":{"k":[{"Path":"c.yaml"}]}}`: `rollouts[0].halted is "bored"`,
		`{"rollouts":[{"group":"","fromFiles":"k"}],"files":{"k":[{"Path":"c.yaml"}]}}`:                      "rollouts[0].group is empty",
		`{"rollouts":[{"group":"edge","fromFiles":"nope"}]}`:                                                 "rollouts[0].fromFiles names no saved config",
		`{"format":2,"rollouts":[]}`: "format 2, written by a newer Pylon",
	}
	for body, want := range cases {
		path := filepath.Join(t.TempDir(), "rollouts.json")
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := New(Options{Publisher: fleet.NewPublisher(), StatePath: path})
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), want) {
			t.Errorf("state %s: %v, want an error naming %s and %q", body, err, path, want)
		}
	}
}

// haltedOnDisk runs a rollout from v1 (config "1") to v2 (config "2"),
// halts it and returns its state file, with what a restart needs: byFile
// is what compile gives for each config, for the test to change.
func haltedOnDisk(t *testing.T) (path string, v1, v2 *fleet.Fleet, byFile map[string]*fleet.Fleet, compile func([]config.File) (*fleet.Fleet, error), clk *clock) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "rollouts.json")
	v1, v2 = policyFleet(t, time.Second, policy), policyFleet(t, 2*time.Second, policy)
	byFile = map[string]*fleet.Fleet{"1": v1, "2": v2}
	compile = func(fs []config.File) (*fleet.Fleet, error) { return byFile[string(fs[0].Data)], nil }
	clk = newClock()
	c, _ := New(Options{Publisher: fleet.NewPublisher(), StatePath: path, Compile: compile, Now: clk.Now, After: clk.After})
	c.Publish(v1, files("1"))
	c.Publish(v2, files("2"))
	if _, err := c.Halt("edge"); err != nil {
		t.Fatal(err)
	}
	return path, v1, v2, byFile, compile, clk
}

// A halted rollout whose previous config compiles to another version after
// a restart (a certificate it names changed meanwhile) stays halted, from
// that version: the nodes never get the rejected change.
func TestRestartKeepsHaltedRolloutWhosePreviousChanged(t *testing.T) {
	path, _, v2, byFile, compile, clk := haltedOnDisk(t)
	v1b := policyFleet(t, 1500*time.Millisecond, policy)
	// While stopped, what config 1 names changed: it now compiles to v1b.
	byFile["1"] = v1b
	pub := fleet.NewPublisher()
	c2, err := New(Options{Publisher: pub, StatePath: path, Compile: compile, Now: clk.Now, After: clk.After})
	if err != nil {
		t.Fatal(err)
	}
	c2.Publish(policyFleet(t, 2*time.Second, policy), files("2"))
	s := c2.Status()
	if len(s) != 1 || s[0].Halted != ReasonOperator || s[0].From != v1b.Groups()[0].Snapshot.ConfigVersion() {
		t.Fatalf("after a restart: %+v, want still halted, from the recompiled previous version", s)
	}
	if n := onNew(pub, v2.Groups()[0].Snapshot); n != 0 {
		t.Fatalf("%d of 1000 nodes got the halted change after the restart", n)
	}
}

// A state file written before the format field (format 0) has snapshot
// versions in From and To: translated, a halted rollout stays halted after
// the restart instead of starting over at stage 1.
func TestFormat0StateResumesHalted(t *testing.T) {
	path, v1, v2, _, compile, clk := haltedOnDisk(t)
	// The file as the code before format 1 wrote it.
	var st state
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &st); err != nil {
		t.Fatal(err)
	}
	st.Format = 0
	st.Rollouts[0].From, st.Rollouts[0].To = v1.Groups()[0].Snapshot.Version(), v2.Groups()[0].Snapshot.Version()
	if st.Rollouts[0].From == v1.Groups()[0].Snapshot.ConfigVersion() {
		t.Fatal("the test's snapshot and config versions are alike: it proves nothing")
	}
	if data, err = json.Marshal(st); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	pub := fleet.NewPublisher()
	c2, err := New(Options{Publisher: pub, StatePath: path, Compile: compile, Now: clk.Now, After: clk.After})
	if err != nil {
		t.Fatal(err)
	}
	c2.Publish(policyFleet(t, 2*time.Second, policy), files("2"))
	if s := c2.Status(); len(s) != 1 || s[0].Halted != ReasonOperator || s[0].From != v1.Groups()[0].Snapshot.ConfigVersion() {
		t.Fatalf("after a restart from a format-0 file: %+v, want still halted", s)
	}
	if n := onNew(pub, v2.Groups()[0].Snapshot); n != 0 {
		t.Fatalf("%d of 1000 nodes got the halted change after the restart", n)
	}
}

// Writing the state (a file written, synced and renamed) does not hold the
// xDS stream events up: they take the controller's lock on every stream's
// push while a rollout runs, and the write happens after it is released.
// A write in progress is stood for by holding saveMu.
func TestStateWriteDoesNotBlockEvents(t *testing.T) {
	clk := newClock()
	path := filepath.Join(t.TempDir(), "rollouts.json")
	c, _ := New(Options{Publisher: fleet.NewPublisher(), StatePath: path, Now: clk.Now, After: clk.After})
	c.Publish(policyFleet(t, time.Second, policy), files("1"))
	c.Publish(policyFleet(t, 2*time.Second, policy), files("2"))
	in, _ := stageNodes()
	c.saveMu.Lock() // a slow disk
	promoted := make(chan error, 1)
	go func() { _, err := c.Promote("edge"); promoted <- err }()
	waitFor(t, "the promotion to stage its state", func() bool { return c.staged.Load() != nil })
	observed := make(chan struct{})
	go func() {
		e := status.Event{Kind: status.RequestACK, Group: "edge", Node: &corev3.Node{Id: in}, Member: &nodegroup.Node{ID: in}, TypeURL: xdstype.ClusterURL, StreamID: 1}
		c.Observe(&e)
		close(observed)
	}()
	select {
	case <-observed:
	case <-time.After(10 * time.Second):
		t.Fatal("a stream event waited for the rollout state's write")
	}
	c.saveMu.Unlock()
	if err := <-promoted; err != nil {
		t.Fatal(err)
	}
	st, err := load(path, nil)
	if err != nil || st == nil || len(st.Rollouts) != 1 || st.Rollouts[0].Stage != 2 {
		t.Fatalf("state on disk after the write: %+v, %v; want the rollout at stage 2", st, err)
	}
}

// A halted rollout's previous config that holds a file a source bounds
// itself (the Kubernetes source's, outside the own files' 64 MiB) is
// compiled after a restart with that file still marked so: read back as
// an own file, a large cluster's files would put the saved config over the
// limit, it would not compile, and every node would get the halted change.
func TestRestartKeepsWhichFilesASourceBounds(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rollouts.json")
	v1, v2 := policyFleet(t, time.Second, policy), policyFleet(t, 2*time.Second, policy)
	var compiled [][]config.File
	compile := func(fs []config.File) (*fleet.Fleet, error) {
		compiled = append(compiled, fs)
		return map[string]*fleet.Fleet{"1": v1, "2": v2}[string(fs[0].Data)], nil
	}
	clk := newClock()
	c, _ := New(Options{Publisher: fleet.NewPublisher(), StatePath: path, Compile: compile, Now: clk.Now, After: clk.After})
	c.Publish(v1, append(files("1"), config.File{Path: "kubernetes/services.json", Data: []byte("{}"), SourceBounded: true}))
	c.Publish(v2, files("2"))
	if _, err := c.Halt("edge"); err != nil {
		t.Fatal(err)
	}
	c2, err := New(Options{Publisher: fleet.NewPublisher(), StatePath: path, Compile: compile, Now: clk.Now, After: clk.After})
	if err != nil {
		t.Fatal(err)
	}
	c2.Publish(v2, files("2"))
	if len(compiled) != 1 || len(compiled[0]) != 2 || !compiled[0][1].SourceBounded || compiled[0][0].SourceBounded {
		t.Fatalf("the saved previous config compiled after the restart as %+v, want c.yaml as an own file and kubernetes/services.json still bounded by its source", compiled)
	}
	if s := c2.Status(); len(s) != 1 || s[0].Halted != ReasonOperator {
		t.Fatalf("after a restart: %+v, want the rollout still halted", s)
	}
}

// A state larger than a start would read is not written, and the older
// state on disk is removed with it: a restart then resumes no rollout (as
// the log says) rather than failing to start on a file over the bound, or
// resuming a rollout that has moved on since.
func TestStateOverTheBoundIsNotLeftStale(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rollouts.json")
	var logs strings.Builder
	clk := newClock()
	c, _ := New(Options{Publisher: fleet.NewPublisher(), StatePath: path, Now: clk.Now, After: clk.After, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	c.Publish(policyFleet(t, time.Second, policy), files("1"))
	c.Publish(policyFleet(t, 2*time.Second, policy), files("2"))
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the state of a rollout: %v, want it written", err)
	}
	c.maxState = 64 // the next state is over it
	c.Publish(policyFleet(t, 3*time.Second, policy), files("3"))
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("state file after a state over the bound: %v, want the older one removed", err)
	}
	if !strings.Contains(logs.String(), "over the 64-byte limit") {
		t.Errorf("log: %s\nwant it to say the state is over the limit", logs.String())
	}
}

// While a rollout runs, a publish of endpoints alone leaves the state file
// as it is: the state it would write is the same, and rewriting (and
// syncing) a file of whole configs on every registration under churn is
// the cost of the configs' size, not of the change.
func TestEndpointChurnDuringARolloutLeavesTheStateFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rollouts.json")
	clk := newClock()
	c, err := New(Options{Publisher: fleet.NewPublisher(), StatePath: path, Now: clk.Now, After: clk.After})
	if err != nil {
		t.Fatal(err)
	}
	c.Publish(fleetEDS(t, time.Second, 1), files("1"))
	c.Publish(fleetEDS(t, 2*time.Second, 1), files("2"))
	// Marked, to tell a rewrite (a new file, created 0600) from the file
	// left as it is: inode numbers are reused too soon to tell.
	if err := os.Chmod(path, 0o640); err != nil {
		t.Fatalf("the state of a running rollout: %v", err)
	}
	for port := 2; port < 5; port++ {
		c.Publish(fleetEDS(t, 2*time.Second, uint32(port)), files("2"))
	}
	if mode := modeOf(t, path); mode != 0o640 {
		t.Errorf("the state file after changes of endpoints alone: mode %v; want it left as it was (0640, the test's mark)", mode)
	}
	if s := c.Status(); len(s) != 1 {
		t.Fatalf("rollouts %+v, want the one still running", s)
	}
	// A change the state holds is written.
	if _, err := c.Halt("edge"); err != nil {
		t.Fatal(err)
	}
	if mode := modeOf(t, path); mode != 0o600 {
		t.Errorf("the state file after a halt: mode %v; want it written again (0600)", mode)
	}
}

func modeOf(t *testing.T, path string) fs.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}
