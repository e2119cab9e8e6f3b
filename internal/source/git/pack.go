package git

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/storage/memory"

	"github.com/pylon-xds/pylon/internal/config"
)

// bounded is the memory a fetch writes its objects to, refusing them once
// they are over a bound: their bytes (a repository that grew a large
// file), their count (a pack of countless empty objects, each of which
// costs memory to hold), one object's size, or one tree's size (a folder
// of millions of entries, decoded whole when read).
type bounded struct {
	*memory.Storage
	w       *wire
	ref     string
	left    int64
	objects int
	// over is the bound the commit's objects went over: a verdict on
	// the commit, which the same commit meets again.
	over error
}

// maxTreeBytes bounds one tree object: 8 MiB is some 200,000 entries, far
// more than a folder of config has, and decoding it takes a few times
// that in memory.
const maxTreeBytes = 8 << 20

// maxObjectBytes bounds one object, inflated: no config file is larger
// than a folder of them may be, and go-git holds an object it stores a few
// times over while it does.
const maxObjectBytes = config.MaxTotalBytes

// refuse makes the commit's verdict an error saying which bound it went
// over, and returns it.
func (b *bounded) refuse(format string, args ...any) error {
	b.over = fmt.Errorf("git %s: fetching %s: "+format, append([]any{b.w.s.shown, b.ref}, args...)...)
	return b.over
}

// overBytes, overCount and overObject refuse the commit for a bound.
func (b *bounded) overBytes() error {
	return b.refuse("the commit's objects are over the limit of %d KiB", b.w.s.o.MaxBytes>>10)
}

func (b *bounded) overCount() error {
	return b.refuse("the commit has more than %d objects (files and folders), over the limit", b.w.s.o.MaxObjects)
}

// overObject refuses an object of typ and size over the bound of one
// object or one tree; nil if it is within them.
func (b *bounded) overObject(typ plumbing.ObjectType, size int64) error {
	switch {
	case size > maxObjectBytes:
		return b.refuse("the commit holds a file or folder of %d bytes, over the limit of %d MiB for one object", size, maxObjectBytes>>20)
	case typ == plumbing.TreeObject && size > maxTreeBytes:
		return b.refuse("a folder is a tree of %d KiB, over the limit of %d KiB for one folder", size>>10, maxTreeBytes>>10)
	}
	return nil
}

func (b *bounded) SetEncodedObject(o plumbing.EncodedObject) (plumbing.Hash, error) {
	if b.over != nil {
		return plumbing.ZeroHash, b.over
	}
	b.objects++
	b.left -= o.Size()
	switch {
	case b.left < 0:
		return plumbing.ZeroHash, b.overBytes()
	case b.objects > b.w.s.o.MaxObjects:
		return plumbing.ZeroHash, b.overCount()
	}
	if err := b.overObject(o.Type(), o.Size()); err != nil {
		return plumbing.ZeroHash, err
	}
	return b.Storage.SetEncodedObject(o)
}

// load stores in b the objects of the pack the host sends. go-git's
// parser inflates each object whole in memory before it is stored, and
// the wire's bound counts compressed bytes (zeros compress 1000:1, and a
// delta of a few bytes can describe a file of any size), so the pack is
// read whole first, within the wire's bound (file:// included), and check
// weighs its objects by the sizes their headers declare before the parser
// inflates any.
func (b *bounded) load(pack io.Reader) error {
	data, err := io.ReadAll(&capped{r: pack, w: b.w, left: packWireLimit(b.w.s.o.MaxBytes), err: b.w.packOver})
	if err != nil {
		return err
	}
	if err := b.check(data); err != nil {
		return err
	}
	// A pack that seeks makes the parser read deltas from it rather than
	// hold them.
	return packfile.UpdateObjectStorage(b, bytes.NewReader(data))
}

// check weighs the pack's objects by the sizes their headers declare:
// their count, each one's size, and their sum. The sizes bound what
// inflating them makes (go-git's scanner fails an object that inflates
// past its size, and a delta that makes more than its target). Only
// deltas are inflated here, streaming, for the target size at their start.
func (b *bounded) check(pack []byte) error {
	sc := packfile.NewScanner(bytes.NewReader(pack))
	_, count, err := sc.Header()
	if err != nil {
		return err
	}
	if int64(count) > int64(b.w.s.o.MaxObjects) {
		return b.overCount()
	}
	left := b.w.s.o.MaxBytes
	for range count {
		h, err := sc.NextObjectHeader()
		if err != nil {
			return err
		}
		typ, size := h.Type, h.Length
		if typ.IsDelta() {
			// A delta's instructions are at most a little larger than
			// what they make (the parser holds them whole); what they
			// make is weighed below.
			if size > 2*maxObjectBytes {
				return b.refuse("the commit holds a delta of %d bytes, over the limit of %d MiB for one", size, 2*maxObjectBytes>>20)
			}
			if size, err = deltaTarget(sc); err != nil {
				return err
			}
		}
		if err := b.overObject(typ, size); err != nil {
			return err
		}
		if left -= size; left < 0 {
			return b.overBytes()
		}
	}
	return nil
}

// errBadDelta is a delta without its sizes at its start.
var errBadDelta = errors.New("malformed pack: a delta without its sizes")

// deltaTarget is the size of what the delta the scanner is at makes, read
// from the start of its instructions (the base's size, then the target's,
// each a base-128 number).
func deltaTarget(sc *packfile.Scanner) (int64, error) {
	var head deltaHead
	if _, _, err := sc.NextObject(&head); err != nil {
		return 0, err
	}
	r := bytes.NewReader(head.b)
	if _, err := binary.ReadUvarint(r); err != nil {
		return 0, errBadDelta
	}
	size, err := binary.ReadUvarint(r)
	if err != nil || size > math.MaxInt64 {
		return 0, errBadDelta
	}
	return int64(size), nil
}

// deltaHead keeps the first bytes written to it (room for two base-128
// numbers) and drops the rest.
type deltaHead struct{ b []byte }

func (d *deltaHead) Write(p []byte) (int, error) {
	if n := min(len(p), 2*binary.MaxVarintLen64-len(d.b)); n > 0 {
		d.b = append(d.b, p[:n]...)
	}
	return len(p), nil
}
