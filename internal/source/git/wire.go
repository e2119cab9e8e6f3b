package git

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/file"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/go-git/go-git/v5/storage/memory"
)

// wire is one poll's connection to the host, and the bounds on what the
// host may send it: a hostile or broken host could advertise refs without
// end, send a pack without end, or a pack of countless objects, and each
// would be held in memory until the poll's timeout. A read over a bound
// fails the poll with over, an error saying which bound and naming the
// repository, whatever go-git makes of the failed read.
type wire struct {
	s    *Source
	over atomic.Pointer[error]
}

// trip records err as the bound that ended the poll (the first one only)
// and returns it.
func (w *wire) trip(err error) error {
	w.over.CompareAndSwap(nil, &err)
	return *w.over.Load()
}

// tripped is the bound a read went over, or nil.
func (w *wire) tripped() error {
	if p := w.over.Load(); p != nil {
		return *p
	}
	return nil
}

// refsOver is the error of an advertisement over MaxRefBytes.
func (w *wire) refsOver() error {
	return fmt.Errorf("git %s: the host's ref advertisement is over the limit of %d KiB (too many refs, or refs too long)", w.s.shown, w.s.o.MaxRefBytes>>10)
}

// packOver is the error of a pack over what MaxBytes of objects can take.
func (w *wire) packOver() error {
	return fmt.Errorf("git %s: the host sent more than %d KiB for one commit, over the limit", w.s.shown, packWireLimit(w.s.o.MaxBytes)>>10)
}

// packWireLimit is how much a host may send for a fetch of max bytes of
// objects: a pack is compressed, but incompressible files and the
// protocol's framing add a little.
func packWireLimit(max int64) int64 { return max + max/16 + 64<<10 }

// capped reads at most left bytes of r; reading past them fails with
// err, tripped on w. Its bound can be moved from one phase of a stream to
// the next (over SSH the advertisement and the pack are one stream).
type capped struct {
	r    io.Reader
	w    *wire
	left int64
	err  func() error
}

func (c *capped) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, c.w.trip(c.err())
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}

// set bounds what is read from here on.
func (c *capped) set(left int64, err func() error) { c.left, c.err = left, err }

// cappedBody is an HTTP response's body read through capped.
type cappedBody struct {
	*capped
	io.Closer
}

// cappedHTTP bounds every response body the host sends: the ref
// advertisement (GET .../info/refs) by MaxRefBytes, the pack (and any
// other answer) by the pack's wire limit. An error's body is bounded the
// same way, and shown only in part (see scrub).
type cappedHTTP struct {
	base http.RoundTripper
	w    *wire
}

func (t cappedHTTP) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	c := &capped{r: res.Body, w: t.w}
	if strings.HasSuffix(req.URL.Path, "/info/refs") {
		c.set(t.w.s.o.MaxRefBytes, t.w.refsOver)
	} else {
		c.set(packWireLimit(t.w.s.o.MaxBytes), t.w.packOver)
	}
	res.Body = cappedBody{c, res.Body}
	return res, nil
}

// session opens an upload-pack session with the host, over a transport
// of this poll's own: go-git's default ones are shared by the process and
// unbounded.
func (w *wire) session(ep *transport.Endpoint, auth transport.AuthMethod) (transport.UploadPackSession, error) {
	switch ep.Protocol {
	case "http", "https":
		client := githttp.NewClient(&http.Client{Transport: cappedHTTP{base: w.s.http, w: w}})
		return client.NewUploadPackSession(ep, auth)
	case "ssh":
		a, ok := auth.(pinnedSSH)
		if !ok {
			return nil, errors.New("over ssh:// the credentials are a private key")
		}
		return &sshSession{w: w, ep: ep, auth: a}, nil
	case "file":
		// The operator's own disk, read by Git's own upload-pack: what
		// it sends is bounded by the objects' bounds alone.
		return file.DefaultClient.NewUploadPackSession(ep, auth)
	}
	return nil, fmt.Errorf("unsupported scheme %q", ep.Protocol)
}

// bounded is the memory a fetch writes its objects to, refusing them once
// they are over a bound: their bytes (a repository that grew a large
// file), their count (a pack of countless empty objects, each of which
// costs memory to hold), or one tree's size (a folder of millions of
// entries, decoded whole when read).
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

func (b *bounded) SetEncodedObject(o plumbing.EncodedObject) (plumbing.Hash, error) {
	if b.over != nil {
		return plumbing.ZeroHash, b.over
	}
	s := b.w.s
	b.objects++
	switch b.left -= o.Size(); {
	case b.left < 0:
		b.over = fmt.Errorf("git %s: fetching %s: the commit's objects are over the limit of %d KiB", s.shown, b.ref, s.o.MaxBytes>>10)
	case b.objects > s.o.MaxObjects:
		b.over = fmt.Errorf("git %s: fetching %s: the commit has more than %d objects (files and folders), over the limit", s.shown, b.ref, s.o.MaxObjects)
	case o.Type() == plumbing.TreeObject && o.Size() > maxTreeBytes:
		b.over = fmt.Errorf("git %s: fetching %s: folder %s is a tree of %d KiB, over the limit of %d KiB for one folder", s.shown, b.ref, o.Hash(), o.Size()>>10, maxTreeBytes>>10)
	default:
		return b.Storage.SetEncodedObject(o)
	}
	return plumbing.ZeroHash, b.over
}
