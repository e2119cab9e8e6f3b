package rollout

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/seal"
)

// stateMarker is in the private key of the config a rollout saves.
const stateMarker = "pylon-rollout-state-marker-51c0"

func markerFiles(v string) []config.File {
	return []config.File{{Path: "c.yaml", Data: []byte(v + "\nkey: |\n  -----BEGIN PRIVATE KEY-----\n  " + stateMarker + "\n")}}
}

// stateShows says how raw shows the marker: in clear, as base64 (a
// config.File's data is base64 in the JSON), or not at all.
func stateShows(raw []byte) string {
	if bytes.Contains(raw, []byte(stateMarker)) {
		return "in clear"
	}
	for off := range 3 {
		enc := base64.StdEncoding.EncodeToString(append(bytes.Repeat([]byte("-"), off), stateMarker...))
		if bytes.Contains(raw, []byte(enc[(off+2)/3*4+4:len(enc)-4])) {
			return "as base64"
		}
	}
	return ""
}

func keyLine(t *testing.T, name string) string {
	t.Helper()
	b := make([]byte, seal.KeyBytes)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return name + ":" + base64.StdEncoding.EncodeToString(b)
}

func keyring(t *testing.T, lines ...string) *seal.Keyring {
	t.Helper()
	r, err := seal.Parse([]byte(strings.Join(lines, "\n")), "test")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestEncryptionAtRest_RolloutStateFile: the rollout state file holds the
// previous config, private keys included: with a key it is sealed, so
// nothing of a key shows in it; without the key it is refused naming the
// flag; a new first key (the old one second) reads it and seals it again
// at once, after which the new key alone reads it; a flipped byte is
// refused; a state file written in clear is read and sealed.
func TestEncryptionAtRest_RolloutStateFile(t *testing.T) {
	k1, k2 := keyLine(t, "k1"), keyLine(t, "k2")
	path := filepath.Join(t.TempDir(), "rollouts.json")
	v1, v2 := policyFleet(t, time.Second, policy), policyFleet(t, 2*time.Second, policy)
	byFile := map[string]*fleet.Fleet{"1": v1, "2": v2}
	compile := func(fs []config.File) (*fleet.Fleet, error) {
		v, _, _ := strings.Cut(string(fs[0].Data), "\n")
		return byFile[v], nil
	}
	clk := newClock()
	open := func(ring *seal.Keyring) (*Controller, error) {
		return New(Options{Publisher: fleet.NewPublisher(), StatePath: path, Compile: compile, Now: clk.Now, After: clk.After, Seal: ring})
	}
	c, err := open(keyring(t, k1))
	if err != nil {
		t.Fatal(err)
	}
	c.Publish(v1, markerFiles("1"))
	c.Publish(v2, markerFiles("2"))
	if _, err := c.Halt("edge"); err != nil {
		t.Fatal(err)
	}
	raw := readState(t, path)
	if where := stateShows(raw); where != "" || !bytes.HasPrefix(raw, []byte(seal.Prefix+"k1:")) {
		t.Fatalf("the rollout state file shows the private key %s (starts %q)", where, raw[:min(len(raw), 24)])
	}
	if _, err := open(nil); !errors.Is(err, seal.ErrNoKey) || !strings.Contains(err.Error(), seal.Flag) || !strings.Contains(err.Error(), path) {
		t.Fatalf("a sealed state file without the key: %v", err)
	}
	if _, err := open(keyring(t, k2, k1)); err != nil {
		t.Fatal(err)
	}
	if raw := readState(t, path); !bytes.HasPrefix(raw, []byte(seal.Prefix+"k2:")) {
		t.Fatal("the state file was not sealed again under the new first key when read")
	}
	resumesHalted(t, open, keyring(t, k2), v2)

	bad := readState(t, path)
	bad[len(bad)-20] ^= 1
	writeState(t, path, bad)
	if _, err := open(keyring(t, k2)); !errors.Is(err, seal.ErrDamaged) || !strings.Contains(err.Error(), path) {
		t.Fatalf("a flipped byte: %v", err)
	}

	// A file written in clear (before a key was configured) is read, and
	// sealed at once.
	if _, err := open(nil); err == nil {
		t.Fatal("a damaged state file read without a key")
	}
	os.Remove(path)
	if c, err = open(nil); err != nil {
		t.Fatal(err)
	}
	c.Publish(v1, markerFiles("1"))
	c.Publish(v2, markerFiles("2"))
	if _, err := c.Halt("edge"); err != nil {
		t.Fatal(err)
	}
	if stateShows(readState(t, path)) == "" {
		t.Fatal("the marker is not found in a clear state file: the test proves nothing")
	}
	resumesHalted(t, open, keyring(t, k1), v2)
	if where := stateShows(readState(t, path)); where != "" {
		t.Fatalf("a clear state file read with a key still shows the private key %s", where)
	}
}

// resumesHalted checks a controller opened with ring resumes the halted
// rollout from the state file.
func resumesHalted(t *testing.T, open func(*seal.Keyring) (*Controller, error), ring *seal.Keyring, v2 *fleet.Fleet) {
	t.Helper()
	c, err := open(ring)
	if err != nil {
		t.Fatal(err)
	}
	c.Publish(v2, markerFiles("2"))
	if s := c.Status(); len(s) != 1 || s[0].Halted != ReasonOperator {
		t.Fatalf("after a restart with keys %v: %+v, want still halted", ring.Names(), s)
	}
}

func readState(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeState(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
