package git

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/format/pktline"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/transport"
	cryptossh "golang.org/x/crypto/ssh"
)

// sshSession is git-upload-pack over SSH on a connection this package
// dials and bounds itself: go-git's SSH transport does its handshake with
// no deadline, so a host that accepts the connection and says nothing
// would hold the poll for as long as the connection lasts. Here every
// step (connect, handshake, advertisement, pack) is bounded by the poll's
// context, and what the host sends by the wire's bounds.
type sshSession struct {
	w    *wire
	ep   *transport.Endpoint
	auth pinnedSSH

	conn   net.Conn
	client *cryptossh.Client
	sess   *cryptossh.Session
	in     io.WriteCloser
	out    *capped
	stop   func() bool
	adv    *packp.AdvRefs
}

// connect dials the host and starts git-upload-pack on the repository's
// path, under ctx: its end (the poll's timeout, or a stop) closes the
// connection, which ends any read or write in progress.
func (s *sshSession) connect(ctx context.Context) error {
	port := s.ep.Port
	if port <= 0 {
		port = 22
	}
	addr := net.JoinHostPort(s.ep.Host, strconv.Itoa(port))
	cfg, err := s.auth.ClientConfig()
	if err != nil {
		return err
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	// Closed when ctx ends (not a deadline of the connection's own,
	// which could fire before ctx says why).
	s.conn, s.stop = conn, context.AfterFunc(ctx, func() { conn.Close() })
	c, chans, reqs, err := cryptossh.NewClientConn(conn, addr, cfg)
	if err != nil {
		return err
	}
	s.client = cryptossh.NewClient(c, chans, reqs)
	if s.sess, err = s.client.NewSession(); err != nil {
		return err
	}
	out, err := s.sess.StdoutPipe()
	if err != nil {
		return err
	}
	s.out = &capped{r: out, w: s.w, left: s.w.s.o.MaxRefBytes, err: s.w.refsOver}
	if s.in, err = s.sess.StdinPipe(); err != nil {
		return err
	}
	return s.sess.Start("git-upload-pack " + shellQuote(s.ep.Path))
}

// shellQuote is p as one word of a POSIX shell, as Git quotes the path it
// asks an SSH host's upload-pack for.
func shellQuote(p string) string {
	return "'" + strings.ReplaceAll(p, "'", `'\''`) + "'"
}

func (s *sshSession) AdvertisedReferences() (*packp.AdvRefs, error) {
	return s.AdvertisedReferencesContext(context.Background())
}

func (s *sshSession) AdvertisedReferencesContext(ctx context.Context) (*packp.AdvRefs, error) {
	if s.adv != nil {
		return s.adv, nil
	}
	if err := s.connect(ctx); err != nil {
		return nil, err
	}
	ar := packp.NewAdvRefs()
	if err := ar.Decode(s.out); err != nil {
		if errors.Is(err, packp.ErrEmptyAdvRefs) {
			return nil, transport.ErrEmptyRemoteRepository
		}
		return nil, err
	}
	transport.FilterUnsupportedCapabilities(ar.Capabilities)
	s.adv = ar
	return ar, nil
}

// UploadPack asks for req's objects and returns the host's answer, its
// pack bounded by the wire's pack bound.
func (s *sshSession) UploadPack(ctx context.Context, req *packp.UploadPackRequest) (*packp.UploadPackResponse, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	if _, err := s.AdvertisedReferencesContext(ctx); err != nil {
		return nil, err
	}
	if err := req.UploadRequest.Encode(s.in); err != nil {
		return nil, fmt.Errorf("sending the request: %w", err)
	}
	if err := req.UploadHaves.Encode(s.in, true); err != nil {
		return nil, fmt.Errorf("sending the request: %w", err)
	}
	if err := pktline.NewEncoder(s.in).Encodef("done\n"); err != nil {
		return nil, fmt.Errorf("sending the request: %w", err)
	}
	s.out.set(packWireLimit(s.w.s.o.MaxBytes), s.w.packOver)
	res := packp.NewUploadPackResponse(req)
	if err := res.Decode(io.NopCloser(s.out)); err != nil {
		return nil, fmt.Errorf("reading the answer: %w", err)
	}
	return res, nil
}

// Close ends the session and its connection.
func (s *sshSession) Close() error {
	if s.stop != nil {
		s.stop()
	}
	if s.sess != nil {
		_ = s.sess.Close()
	}
	if s.client != nil {
		_ = s.client.Close()
	}
	if s.conn != nil {
		_ = s.conn.Close()
	}
	return nil
}
