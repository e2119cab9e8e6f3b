package gittest

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// SSHKey is a throwaway key pair: Private in OpenSSH PEM, as a key file
// holds it, and Public.
type SSHKey struct {
	Private []byte
	Public  ssh.PublicKey
}

// NewSSHKey makes an Ed25519 key pair.
func NewSSHKey(t testing.TB) SSHKey {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return SSHKey{Private: pem.EncodeToMemory(block), Public: sshPub}
}

// ServeSSH serves the repository over SSH on 127.0.0.1 until the test
// ends, to the client key allowed only, running git-upload-pack as a Git
// host does. It returns the repository's ssh:// URL and the known_hosts
// line of the server's Ed25519 host key. The server has an ECDSA host key
// too, which clients prefer unless told otherwise, as many Git hosts
// have keys of several types.
func (r *Repo) ServeSSH(allowed ssh.PublicKey) (url, knownHostsLine string) {
	r.t.Helper()
	hostKey := NewSSHKey(r.t)
	signer, err := ssh.ParsePrivateKey(hostKey.Private)
	if err != nil {
		r.t.Fatal(err)
	}
	cfg := &ssh.ServerConfig{PublicKeyCallback: func(_ ssh.ConnMetadata, k ssh.PublicKey) (*ssh.Permissions, error) {
		if string(k.Marshal()) == string(allowed.Marshal()) {
			return nil, nil
		}
		return nil, errors.New("key not allowed")
	}}
	cfg.AddHostKey(signer)
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		r.t.Fatal(err)
	}
	ecSigner, err := ssh.NewSignerFromKey(ecKey)
	if err != nil {
		r.t.Fatal(err)
	}
	cfg.AddHostKey(ecSigner)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		r.t.Fatal(err)
	}
	s := &sshServer{r: r, cfg: cfg, lis: lis, conns: map[net.Conn]bool{}}
	s.wg.Add(1)
	go s.accept()
	r.t.Cleanup(s.close)
	addr := lis.Addr().String()
	return "ssh://git@" + addr + "/repo.git", knownhosts.Line([]string{knownhosts.Normalize(addr)}, signer.PublicKey())
}

// sshServer is ServeSSH's server: every goroutine it starts ends by
// close.
type sshServer struct {
	r   *Repo
	cfg *ssh.ServerConfig
	lis net.Listener
	wg  sync.WaitGroup

	mu     sync.Mutex
	conns  map[net.Conn]bool
	closed bool
}

func (s *sshServer) close() {
	s.lis.Close()
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func (s *sshServer) accept() {
	defer s.wg.Done()
	for {
		c, err := s.lis.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.conns[c] = true
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serve(c)
	}
}

// serve serves one connection's sessions, one at a time.
func (s *sshServer) serve(c net.Conn) {
	defer s.wg.Done()
	defer func() {
		c.Close()
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
	}()
	sc, chans, reqs, err := ssh.NewServerConn(c, s.cfg)
	if err != nil {
		return
	}
	defer sc.Close()
	s.wg.Add(1)
	go func() { defer s.wg.Done(); ssh.DiscardRequests(reqs) }()
	for nc := range chans {
		if nc.ChannelType() != "session" {
			_ = nc.Reject(ssh.UnknownChannelType, "sessions only")
			continue
		}
		ch, creqs, err := nc.Accept()
		if err != nil {
			return
		}
		s.session(ch, creqs)
	}
}

// session runs the one command a Git client asks for:
// git-upload-pack '/repo.git'.
func (s *sshServer) session(ch ssh.Channel, reqs <-chan *ssh.Request) {
	defer ch.Close()
	for req := range reqs {
		if req.Type != "exec" {
			_ = req.Reply(false, nil)
			continue
		}
		var cmd struct{ Command string }
		if err := ssh.Unmarshal(req.Payload, &cmd); err != nil {
			_ = req.Reply(false, nil)
			return
		}
		service, path, ok := strings.Cut(cmd.Command, " ")
		path = strings.Trim(path, "'")
		if !ok || service != "git-upload-pack" || path != "/repo.git" {
			_ = req.Reply(false, nil)
			return
		}
		_ = req.Reply(true, nil)
		code := s.uploadPack(ch)
		_, _ = ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{code}))
		return
	}
}

// uploadPack runs git upload-pack on the repository with the channel as
// its input and output, and returns its exit code.
func (s *sshServer) uploadPack(ch ssh.Channel) uint32 {
	p := exec.Command(s.r.git, "upload-pack", filepath.Join(s.r.root, "repo.git"))
	p.Stdout, p.Stderr = ch, ch.Stderr()
	in, err := p.StdinPipe()
	if err != nil {
		return 1
	}
	if err := p.Start(); err != nil {
		return 1
	}
	// The copy ends when the client closes its side or the channel
	// closes, after the process: Wait does not wait for it.
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		_, _ = io.Copy(in, ch)
		in.Close()
	}()
	if err := p.Wait(); err != nil {
		return 1
	}
	return 0
}
