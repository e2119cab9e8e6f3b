package pipeline

import (
	"crypto/sha256"
	"runtime/debug"
	"runtime/metrics"

	"github.com/pylon-xds/pylon/internal/compile"
	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/diag"
	"github.com/pylon-xds/pylon/internal/fleet"
)

// inputs is what a good update read: the SHA-256 of its files, and of
// each file the config named (certificates, keys) as read. A read that
// failed (and did not fail the compile) makes it never match.
type inputs struct {
	files  [sha256.Size]byte
	read   map[string][sha256.Size]byte
	failed bool
}

// note records the read of a named file.
func (in *inputs) note(path string, data []byte, err error) {
	if err != nil {
		in.failed = true
		return
	}
	in.read[path] = sha256.Sum256(data)
}

// unchanged reports whether files digesting to sum are the last good
// update's files, and every file that config named reads as it did.
func (p *Pipeline) unchanged(sum [sha256.Size]byte) bool {
	p.mu.Lock()
	good := p.good
	p.mu.Unlock()
	if good == nil || good.failed || good.files != sum {
		return false
	}
	for path, was := range good.read {
		b, err := p.o.Read(path)
		if err != nil || sha256.Sum256(b) != was {
			return false
		}
	}
	return true
}

// releaseAfter is what a compile must allocate for the pipeline to hand
// the freed memory back to the system after it: loading a config
// allocates several times its size, and the collector's pacing keeps the
// heap's pages at about twice what is live, so a 15 MiB config left the
// process's RSS at hundreds of MiB above what it keeps. 256 MiB is a
// config of several MiB loaded whole; a change to one object of it
// allocates far less and releases nothing (a release is a full
// collection).
const releaseAfter = 256 << 20

// compile compiles files through the pipeline's cache, and returns the
// memory a large load freed to the system.
func (p *Pipeline) compile(files []config.File, read compile.ReadFile) (*fleet.Fleet, diag.List, error) {
	before := allocated()
	built, warnings, err := p.compiled.CompileWithWarnings(p.o.Registry, files, read)
	if allocated()-before >= releaseAfter {
		debug.FreeOSMemory()
	}
	return built, warnings, err
}

// allocated is the bytes the process has allocated on the heap so far.
func allocated() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}
