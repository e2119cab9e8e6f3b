package relay

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/anypb"

	"github.com/pylon-xds/pylon/internal/nodegroup"
	"github.com/pylon-xds/pylon/internal/relay/upstream"
	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// What a relay keeps of a key in its data folder: the resources of its
// last good snapshot as the upstream sent them (encoded protos, with the
// upstream's versions, which the next stream resumes with), one file per
// key, written whole or not at all. Only what was served is kept: never a
// Secret (the relay subscribes to none), never a resource the build held
// back (key material outside a Secret among others), never a resource
// with a TTL (it lives as long as the upstream refreshes it: a relay
// restarted while the upstream is away must not serve it).

// keptKey is one key's file.
type keptKey struct {
	Key    string                    `json:"key"`
	Values map[string]string         `json:"values"`
	Group  *nodegroup.Group          `json:"group,omitempty"`
	As     *nodegroup.Node           `json:"as,omitempty"`
	Types  map[string][]keptResource `json:"types"`
}

type keptResource struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	Value   []byte `json:"value"`
	// Aliases are the names a virtual host was sent for (VHDS).
	Aliases []string `json:"aliases,omitempty"`
	// TTL is read only to skip what older relays kept with one.
	TTL time.Duration `json:"ttl,omitempty"`
}

// maxKeptFile bounds one key's file on reading.
const maxKeptFile = 256 << 20

func (r *Relay) keysDir() string { return filepath.Join(r.o.DataDir, "relay-keys") }

func (r *Relay) keyFile(name string) string {
	sum := sha256.Sum256([]byte(name))
	return filepath.Join(r.keysDir(), hex.EncodeToString(sum[:12])+".json")
}

// persist writes the key's served resources; a no-op without DataDir. A
// resource served at its previous version (old: its newest was held back)
// is kept as last kept, never as the upstream's newest: that may hold key
// material, and kept under the newest version a restarted relay would
// resume claiming it and never be sent it again, losing the good one.
func (r *Relay) persist(ks *keyState, state upstream.State, snap *snapshot.Snapshot, old map[resourceID]bool) error {
	if r.o.DataDir == "" {
		return nil
	}
	r.mu.Lock()
	k := ks.key // its group's rule changes with the upstream's (applyPending)
	r.mu.Unlock()
	kept := keptKey{Key: k.Name, Values: k.Values, Group: k.Group, As: k.As, Types: map[string][]keptResource{}}
	for url, held := range state {
		set := snap.Set(url)
		for _, name := range slices.Sorted(maps.Keys(held)) {
			if set.Get(name) == nil || held[name].TTL > 0 {
				continue
			}
			res := keptResource{Name: name, Version: held[name].Version, Value: held[name].Any.GetValue(), Aliases: held[name].Aliases}
			if old[resourceID{url, name}] {
				var ok bool
				if res, ok = ks.lastKept(url, name); !ok {
					continue // its good version came from no file: the upstream sends it again
				}
			}
			kept.Types[url] = append(kept.Types[url], res)
		}
	}
	b, err := json.Marshal(kept)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(r.keysDir(), 0o700); err != nil {
		return err
	}
	if err := writeAtomic(r.keyFile(k.Name), b); err != nil {
		return err
	}
	ks.kept = kept.Types
	return nil
}

// lastKept is what the key's file last kept of a resource.
func (ks *keyState) lastKept(url, name string) (keptResource, bool) {
	for _, res := range ks.kept[url] {
		if res.Name == name {
			return res, true
		}
	}
	return keptResource{}, false
}

// writeAtomic writes b to path through a synced temporary file renamed
// over it: a crash leaves the old file or the new, never half of one.
func writeAtomic(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// forget removes a dropped key's file.
func (r *Relay) forget(name string) {
	if r.o.DataDir == "" {
		return
	}
	if err := os.Remove(r.keyFile(name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		r.o.Logger.Warn("relay: cannot remove a dropped key's file", "key", name, "err", err)
	}
}

// loaded is a key read back from the data folder: its resources, and the
// VHDS aliases its virtual hosts were sent for.
type loaded struct {
	key     Key
	state   upstream.State
	aliases []string
}

// load reads the kept keys. A file that cannot be read, whose key the
// template no longer makes, or that holds more than MaxResources is
// skipped with a warning: the upstream sends that key's config again. A
// folder others can read or write is refused (checkKeysDir).
func (r *Relay) load() ([]loaded, error) {
	if r.o.DataDir == "" {
		return nil, nil
	}
	if err := checkKeysDir(r.keysDir()); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	entries, err := os.ReadDir(r.keysDir())
	if err != nil {
		return nil, fmt.Errorf("relay data folder: %w", err)
	}
	var out []loaded
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") || len(out) >= r.o.MaxKeys {
			continue
		}
		path := filepath.Join(r.keysDir(), e.Name())
		l, err := r.loadFile(path)
		if err != nil {
			r.o.Logger.Warn("relay: skipping a kept key", "file", path, "err", err)
			continue
		}
		out = append(out, l)
	}
	return out, nil
}

// checkKeysDir refuses a kept keys' folder that is not a folder of its
// own (a link) or that others can read or write: what it holds is served
// to every key's proxies at start, so a writer could serve them anything,
// as a reader could learn the whole config. It is made 0700; a mode
// changed since is the operator's to fix, as for the other private files.
func checkKeysDir(dir string) error {
	fi, err := os.Lstat(dir)
	switch {
	case err != nil:
		return err
	case !fi.IsDir():
		return fmt.Errorf("relay data folder %s is not a folder (a link?): the kept keys need a folder of their own, mode 0700", dir)
	case fi.Mode().Perm()&0o077 != 0:
		return fmt.Errorf("relay data folder %s has mode %v: others can read or change the config it keeps; chmod 700 it", dir, fi.Mode().Perm())
	}
	return nil
}

func (r *Relay) loadFile(path string) (loaded, error) {
	f, err := os.Open(path)
	if err != nil {
		return loaded{}, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxKeptFile+1))
	if err != nil {
		return loaded{}, err
	}
	if len(b) > maxKeptFile {
		return loaded{}, fmt.Errorf("larger than the bound of %d bytes", maxKeptFile)
	}
	var kept keptKey
	if err := json.Unmarshal(b, &kept); err != nil {
		return loaded{}, err
	}
	k, err := r.keptKeyOf(kept, path)
	if err != nil {
		return loaded{}, err
	}
	state := upstream.State{}
	relayed := map[string]bool{}
	for _, t := range r.types {
		relayed[t.URL] = true
	}
	total := 0
	var aliases []string
	for url, rs := range kept.Types {
		if !relayed[url] {
			continue // a Secret, say: never served from a file
		}
		if total += len(rs); total > r.o.MaxResources {
			return loaded{}, fmt.Errorf("key %q holds more than %d resources (--max-key-resources)", kept.Key, r.o.MaxResources)
		}
		m := make(map[string]upstream.Resource, len(rs))
		for _, res := range rs {
			if res.TTL != 0 {
				continue // an older relay's: a TTL'd resource outlives no upstream
			}
			held := upstream.Resource{Version: res.Version, Any: &anypb.Any{TypeUrl: url, Value: res.Value}}
			if url == xdstype.VirtualHostURL {
				// Counted as names asked for are (at most MaxResources).
				if len(aliases)+len(res.Aliases) > r.o.MaxResources {
					return loaded{}, fmt.Errorf("key %q holds virtual hosts for more than %d aliases (--max-key-resources)", kept.Key, r.o.MaxResources)
				}
				held.Aliases = res.Aliases
				aliases = append(aliases, res.Aliases...)
			}
			m[res.Name] = held
		}
		state[url] = m
	}
	return loaded{key: k, state: state, aliases: aliases}, nil
}

// keptKeyOf is the key of a kept file: the template's, or with a Pylon
// upstream's group rules, the group's as kept (the rules are read again
// from the upstream; until then the kept keys serve what they hold).
func (r *Relay) keptKeyOf(kept keptKey, path string) (Key, error) {
	if r.o.Groups != nil {
		if kept.Group == nil || kept.As == nil || kept.Group.Name != kept.Key || path != r.keyFile(kept.Key) {
			return Key{}, fmt.Errorf("key %q is not a group of the upstream's (the relay was keyed by --key before)", kept.Key)
		}
		g := nodegroup.Group{Name: kept.Group.Name, Match: kept.Group.Match, Default: kept.Group.Default}
		as := *kept.As
		as.Identities = nil
		return Key{Name: kept.Key, Group: &g, As: &as}, nil
	}
	k, err := r.o.Template.KeyOf(nodeOf(kept.Values))
	if err != nil || kept.Group != nil || k.Name != kept.Key || path != r.keyFile(k.Name) {
		return Key{}, fmt.Errorf("key %q is not one the key template %q makes", kept.Key, r.o.Template)
	}
	return k, nil
}

// nodeOf is a node with the given key fields.
func nodeOf(values map[string]string) nodegroup.Node {
	n := nodegroup.Node{Metadata: map[string]string{}}
	for f, v := range values {
		switch f {
		case "cluster":
			n.Cluster = v
		case "locality.region":
			n.Region = v
		case "locality.zone":
			n.Zone = v
		case "locality.sub_zone":
			n.SubZone = v
		default:
			n.Metadata[strings.TrimPrefix(f, "metadata.")] = v
		}
	}
	return n
}
