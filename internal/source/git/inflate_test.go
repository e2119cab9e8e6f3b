package git

import (
	"bytes"
	"compress/zlib"
	"crypto/sha1"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/pylon-xds/pylon/internal/source"
	"github.com/pylon-xds/pylon/internal/source/git/gittest"
)

// allocated is how many bytes the process allocates while f runs.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// A file of zeros compresses some 1000:1, so a pack well within the wire's
// bound can hold a file far over MaxBytes: it is refused from the size its
// header declares, before it is inflated, over smart HTTP and file://.
// (It is within the bound of one object, 64 MiB.)
func TestCompressedFileIsRefusedBeforeItIsInflated(t *testing.T) {
	repo := gittest.New(t)
	repo.Commit(map[string]string{"pylon.yaml": "resources: []\n", "other/zeros.bin": strings.Repeat("\x00", 48<<20)})
	const max = 1 << 20
	for _, url := range []string{repo.ServeHTTP(""), repo.FileURL()} {
		var s *Source
		var u source.Update
		n := allocated(func() {
			var updates <-chan source.Update
			s, updates, _ = start(t, Options{URL: url, MaxBytes: max})
			u = next(t, updates)
		})
		wantRefusal(t, s, u, "the commit's objects are over the limit of 1024 KiB")
		if n > 8*max {
			t.Errorf("%s: a fetch bounded at 1 MiB of objects allocated %d MiB to refuse a file of 48 MiB", url, n>>20)
		}
	}
}

// A file of zeros over the bound for one object is refused naming that
// bound, even within MaxBytes.
func TestFileOverTheObjectBoundIsRefused(t *testing.T) {
	repo := gittest.New(t)
	repo.Commit(map[string]string{"pylon.yaml": "resources: []\n", "other/zeros.bin": strings.Repeat("\x00", 64<<20+1)})
	s, updates, _ := start(t, Options{URL: repo.FileURL()})
	wantRefusal(t, s, next(t, updates), "a file or folder of 67108865 bytes, over the limit of 64 MiB for one object")
}

// A delta of a few KiB can describe a file of any size (each byte of it
// copies 64 KiB of its base): it is refused from the size its header
// declares, before it is applied.
func TestDeltaBombIsRefusedBeforeItIsApplied(t *testing.T) {
	repo := gittest.New(t)
	rev := repo.Commit(map[string]string{"pylon.yaml": "resources: []\n"})
	pack := deltaBomb(256 << 20)
	url := repo.Serve(packHost(repo.HTTPHandler(""), rev, pack))
	const max = 1 << 20
	var s *Source
	var u source.Update
	n := allocated(func() {
		var updates <-chan source.Update
		s, updates, _ = start(t, Options{URL: url, MaxBytes: max})
		u = next(t, updates)
	})
	wantRefusal(t, s, u, "a file or folder of 268435456 bytes, over the limit of 64 MiB for one object")
	if n > 8*max {
		t.Errorf("a fetch bounded at 1 MiB of objects allocated %d MiB to refuse a pack of %d bytes", n>>20, len(pack))
	}
}

// A commit whose files are deltas of each other is read when their sizes
// together are within MaxBytes: an object the pack sends as a delta is
// counted once.
func TestDeltasAreCountedOnce(t *testing.T) {
	repo := gittest.New(t)
	r := rand.New(rand.NewPCG(1, 2))
	var b strings.Builder
	for b.Len() < 100<<10 {
		fmt.Fprintf(&b, "%016x\n", r.Uint64())
	}
	a := b.String()
	rev := repo.Commit(map[string]string{"pylon.yaml": "resources: []\n", "other/a.txt": a, "other/b.txt": a + "b\n", "other/c.txt": a + "c\n"})
	_, updates, _ := start(t, Options{URL: repo.ServeHTTP(""), MaxBytes: 400 << 10})
	wantFiles(t, next(t, updates), rev, "pylon.yaml=resources: []\n;")
}

// A delta whose instructions are over twice the bound of one object is
// refused from its header, before they are inflated.
func TestHugeDeltaIsRefusedBeforeItIsInflated(t *testing.T) {
	repo := gittest.New(t)
	rev := repo.Commit(map[string]string{"pylon.yaml": "resources: []\n"})
	var pack bytes.Buffer
	pack.WriteString("PACK")
	_ = binary.Write(&pack, binary.BigEndian, [2]uint32{2, 2})
	packObject(&pack, 3, 4, []byte("base"), nil)
	packObject(&pack, 6, 2*maxObjectBytes+1, []byte{4, 4}, ofsDelta(pack.Len()-12))
	sum := sha1.Sum(pack.Bytes())
	pack.Write(sum[:])
	s, updates, _ := start(t, Options{URL: repo.Serve(packHost(repo.HTTPHandler(""), rev, pack.Bytes()))})
	wantRefusal(t, s, next(t, updates), "a delta of 134217729 bytes, over the limit of 128 MiB for one")
}

// The sizes check weighs objects by bound what inflating them makes: a
// file that inflates past the size its header declares fails as it
// passes it (go-git's scanner), not once it is whole.
func TestFileLongerThanItsHeaderIsRefused(t *testing.T) {
	repo := gittest.New(t)
	rev := repo.Commit(map[string]string{"pylon.yaml": "resources: []\n"})
	var pack bytes.Buffer
	pack.WriteString("PACK")
	_ = binary.Write(&pack, binary.BigEndian, [2]uint32{2, 1})
	packObject(&pack, 3, 4, make([]byte, 64<<20), nil)
	sum := sha1.Sum(pack.Bytes())
	pack.Write(sum[:])
	url := repo.Serve(packHost(repo.HTTPHandler(""), rev, pack.Bytes()))
	const max = 1 << 20
	var s *Source
	var u source.Update
	n := allocated(func() {
		var updates <-chan source.Update
		s, updates, _ = start(t, Options{URL: url, MaxBytes: max})
		u = next(t, updates)
	})
	wantRefusal(t, s, u, "fetching refs/heads/main: packfile: inflated object exceeds declared size")
	if n > 8*max {
		t.Errorf("a fetch bounded at 1 MiB of objects allocated %d MiB to refuse a file of 4 bytes that inflates to 64 MiB", n>>20)
	}
}

// packHost serves h, but answers a fetch with pack, after the shallow
// line for want.
func packHost(h http.Handler, want string, pack []byte) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			h.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/x-git-upload-pack-result")
		pkt := func(s string) { fmt.Fprintf(w, "%04x%s", len(s)+4, s) }
		pkt("shallow " + want + "\n")
		fmt.Fprint(w, "0000")
		pkt("NAK\n")
		for p := pack; len(p) > 0; {
			n := min(len(p), 65515)
			pkt("\x01" + string(p[:n]))
			p = p[n:]
		}
		fmt.Fprint(w, "0000")
	})
}

// deltaBomb is a pack of a blob of 64 KiB of zeros and a delta on it
// that makes a blob of size bytes: one copy instruction per 64 KiB.
func deltaBomb(size int) []byte {
	const base = 64 << 10
	var delta []byte
	delta = binary.AppendUvarint(delta, base)
	delta = binary.AppendUvarint(delta, uint64(size))
	delta = append(delta, bytes.Repeat([]byte{0x80}, size/base)...) // copy 64 KiB from offset 0
	var pack bytes.Buffer
	pack.WriteString("PACK")
	_ = binary.Write(&pack, binary.BigEndian, [2]uint32{2, 2})
	first := pack.Len()
	packObject(&pack, 3, base, make([]byte, base), nil)
	packObject(&pack, 6, len(delta), delta, ofsDelta(pack.Len()-first))
	sum := sha1.Sum(pack.Bytes())
	pack.Write(sum[:])
	return pack.Bytes()
}

// packObject appends an object of type typ, its size n and its data,
// deflated, to pack; extra follows the header (a delta's base).
func packObject(pack *bytes.Buffer, typ byte, n int, data, extra []byte) {
	c := typ<<4 | byte(n&15)
	for n >>= 4; n > 0; n >>= 7 {
		pack.WriteByte(c | 0x80)
		c = byte(n & 127)
	}
	pack.WriteByte(c)
	pack.Write(extra)
	z := zlib.NewWriter(pack)
	_, _ = z.Write(data)
	_ = z.Close()
}

// ofsDelta is Git's encoding of a delta's distance back to its base.
func ofsDelta(off int) []byte {
	out := []byte{byte(off & 127)}
	for off >>= 7; off > 0; off >>= 7 {
		off--
		out = append([]byte{0x80 | byte(off&127)}, out...)
	}
	return out
}
