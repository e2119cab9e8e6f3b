package git

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"unicode"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/capability"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/sideband"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"github.com/go-git/go-git/v5/storage/memory"
	cryptossh "golang.org/x/crypto/ssh"

	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/seal"
	"github.com/pylon-xds/pylon/internal/source"
)

// maxCredentials bounds the credentials file.
const maxCredentials = 64 << 10

// auth reads the credentials file, if any.
func (s *Source) auth() (transport.AuthMethod, error) {
	if s.o.CredentialsFile == "" {
		return nil, nil
	}
	data, err := seal.ReadPrivate(s.o.CredentialsFile, "--git-credentials-file", maxCredentials)
	if err != nil {
		return nil, err
	}
	if s.o.KnownHostsFile != "" {
		return s.sshAuth(data)
	}
	line := string(bytes.TrimSpace(data))
	if line == "" || strings.ContainsAny(line, "\r\n") {
		return nil, fmt.Errorf("--git-credentials-file %s: want one line, user:password or a token", s.o.CredentialsFile)
	}
	if user, pass, ok := strings.Cut(line, ":"); ok {
		return &githttp.BasicAuth{Username: user, Password: pass}, nil
	}
	return &githttp.TokenAuth{Token: line}, nil
}

// sshAuth is the private key key authenticating as the URL's user (default
// "git"), against the hosts of the known_hosts file only.
func (s *Source) sshAuth(key []byte) (transport.AuthMethod, error) {
	u, err := url.Parse(s.o.URL)
	if err != nil {
		return nil, err
	}
	user := "git"
	if u.User != nil && u.User.Username() != "" {
		user = u.User.Username()
	}
	auth, err := gitssh.NewPublicKeys(user, key, "")
	if err != nil {
		// The parser's error names no part of the key.
		return nil, fmt.Errorf("--git-credentials-file %s: not a private key without a passphrase: %w", s.o.CredentialsFile, err)
	}
	hosts, err := gitssh.NewKnownHostsDb(s.o.KnownHostsFile)
	if err != nil {
		return nil, fmt.Errorf("--git-known-hosts: %w", err)
	}
	auth.HostKeyCallback = hosts.HostKeyCallback()
	port := u.Port()
	if port == "" {
		port = "22"
	}
	return pinnedSSH{auth, hosts.HostKeyAlgorithms(net.JoinHostPort(u.Hostname(), port))}, nil
}

// pinnedSSH is an SSH key that asks the host for the key types pinned for
// it (a host with keys of several types shows the one known_hosts has).
type pinnedSSH struct {
	*gitssh.PublicKeys
	algorithms []string
}

func (a pinnedSSH) ClientConfig() (*cryptossh.ClientConfig, error) {
	c, err := a.PublicKeys.ClientConfig()
	if err != nil {
		return nil, err
	}
	c.HostKeyAlgorithms = a.algorithms
	return c, nil
}

// open lists the host's refs in a session of w's and finds the ref's:
// a poll of an unmoved ref costs one ref advertisement. The caller closes
// the session.
func (s *Source) open(ctx context.Context, w *wire, auth transport.AuthMethod) (transport.UploadPackSession, *packp.AdvRefs, error) {
	ep, err := transport.NewEndpoint(s.o.URL)
	if err != nil {
		return nil, nil, fmt.Errorf("git %s: %w", s.shown, err)
	}
	sess, err := w.session(ep, auth)
	if err != nil {
		return nil, nil, fmt.Errorf("git %s: %w", s.shown, err)
	}
	ar, err := sess.AdvertisedReferencesContext(ctx)
	if err != nil {
		sess.Close()
		if over := w.tripped(); over != nil {
			return nil, nil, over
		}
		return nil, nil, fmt.Errorf("git %s: listing refs: %w", s.shown, err)
	}
	return sess, ar, nil
}

// find is the ref's full name and the hash it names in ar, and the commit
// to fetch (an annotated tag's peeled commit, when the host says it).
func (s *Source) find(ar *packp.AdvRefs) (ref string, hash, want plumbing.Hash, err error) {
	names := []string{s.o.Ref}
	if !strings.HasPrefix(s.o.Ref, "refs/") {
		names = []string{"refs/heads/" + s.o.Ref, "refs/tags/" + s.o.Ref}
	}
	for _, name := range names {
		if h, ok := ar.References[name]; ok {
			want = h
			if p, ok := ar.Peeled[name]; ok {
				want = p
			}
			return name, h, want, nil
		}
	}
	return "", plumbing.ZeroHash, plumbing.ZeroHash, fmt.Errorf("git %s: no branch or tag %q (it may have been deleted)", s.shown, s.o.Ref)
}

// read fetches the commit want (that commit alone: depth 1, into bounded
// memory) and reads the folder at it. rev is the commit's SHA. verdict
// says the commit itself decided the outcome (read, or refused for what
// it holds), rather than the way to it (the network, the host).
func (s *Source) read(ctx context.Context, w *wire, sess transport.UploadPackSession, ar *packp.AdvRefs, ref string, want plumbing.Hash) (files []config.File, rev string, verdict bool, err error) {
	st := &bounded{Storage: memory.NewStorage(), w: w, ref: ref, left: s.o.MaxBytes}
	if err := fetch(ctx, sess, ar, want, st); err != nil {
		if st.over != nil {
			return nil, want.String(), true, st.over
		}
		if over := w.tripped(); over != nil {
			return nil, "", false, over
		}
		return nil, "", false, fmt.Errorf("git %s: fetching %s: %w", s.shown, ref, err)
	}
	files, rev, err = s.readFolder(st, want)
	return files, rev, true, err
}

// readFolder reads the folder at the commit want names in st.
func (s *Source) readFolder(st storer.EncodedObjectStorer, want plumbing.Hash) (files []config.File, rev string, err error) {
	commit, err := commitOf(st, want)
	if err != nil {
		return nil, "", fmt.Errorf("git %s: %s: %w", s.shown, want, err)
	}
	rev = commit.Hash.String()
	tree, err := commit.Tree()
	if err != nil {
		return nil, rev, fmt.Errorf("git %s: commit %s: %w", s.shown, rev, err)
	}
	where := s.o.Path
	if where != "" {
		if tree, err = tree.Tree(where); err != nil {
			return nil, rev, fmt.Errorf("git %s: commit %s has no folder %s", s.shown, rev, where)
		}
	} else {
		where = "."
	}
	// No Dir: the files are on no disk, so relative paths they name
	// (certificates) are read under the first secret directory, as the
	// store's are.
	files, err = source.ReadFolder(newTreeFS(tree), where, "")
	if err != nil {
		return nil, rev, fmt.Errorf("git commit %s: %w", rev, err)
	}
	return files, rev, nil
}

// fetch asks the host for want alone (depth 1, no progress) and stores
// the pack it sends in st.
func fetch(ctx context.Context, sess transport.UploadPackSession, ar *packp.AdvRefs, want plumbing.Hash, st *bounded) error {
	req := packp.NewUploadPackRequestFromCapabilities(ar.Capabilities)
	req.Wants = []plumbing.Hash{want}
	req.Depth = packp.DepthCommits(1)
	if err := req.Capabilities.Set(capability.Shallow); err != nil {
		return err
	}
	if ar.Capabilities.Supports(capability.NoProgress) {
		if err := req.Capabilities.Set(capability.NoProgress); err != nil {
			return err
		}
	}
	res, err := sess.UploadPack(ctx, req)
	if err != nil {
		return err
	}
	defer res.Close()
	var pack io.Reader = res
	switch {
	case req.Capabilities.Supports(capability.Sideband64k):
		pack = sideband.NewDemuxer(sideband.Sideband64k, res)
	case req.Capabilities.Supports(capability.Sideband):
		pack = sideband.NewDemuxer(sideband.Sideband, res)
	}
	return st.load(pack)
}

// commitOf is the commit hash names: itself, or the one an annotated tag
// points to.
func commitOf(st storer.EncodedObjectStorer, hash plumbing.Hash) (*object.Commit, error) {
	if c, err := object.GetCommit(st, hash); err == nil {
		return c, nil
	}
	tag, err := object.GetTag(st, hash)
	if err != nil {
		return nil, fmt.Errorf("%s is neither a commit nor a tag", hash)
	}
	return tag.Commit()
}

// maxShown bounds an error's text: a host's refusal carries a body the
// host wrote, which goes to /status and the log.
const maxShown = 1 << 10

// scrub is err as shown: the URL's password and the credentials never
// appear in it (nor the basic auth header a host may echo), a host's text
// is cut to maxShown without control characters, and a timeout says
// which.
func (s *Source) scrub(ctx context.Context, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("git %s: no answer within %s", s.shown, s.o.Timeout)
	}
	msg := strings.ReplaceAll(strings.TrimSpace(err.Error()), s.o.URL, s.shown)
	for _, p := range s.secrets() {
		if len(p) >= 4 {
			msg = strings.ReplaceAll(msg, p, "[redacted]")
		}
	}
	msg = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, msg)
	if len(msg) > maxShown {
		msg = strings.ToValidUTF8(msg[:maxShown], "") + "... (cut)"
	}
	if errors.Is(err, transport.ErrAuthenticationRequired) || errors.Is(err, transport.ErrAuthorizationFailed) {
		msg += " (check --git-credentials-file)"
	}
	return errors.New(msg)
}

// secrets are the strings no error may show: the URL's password and the
// credentials file's, each as the wire carries them too.
func (s *Source) secrets() []string {
	var out []string
	if u, err := url.Parse(s.o.URL); err == nil && u.User != nil {
		if p, ok := u.User.Password(); ok {
			basic := base64.StdEncoding.EncodeToString([]byte(u.User.Username() + ":" + p))
			out = append(out, p, url.QueryEscape(p), url.PathEscape(p), basic)
		}
	}
	if auth, err := s.auth(); err == nil {
		switch a := auth.(type) {
		case *githttp.BasicAuth:
			out = append(out, a.Password, base64.StdEncoding.EncodeToString([]byte(a.Username+":"+a.Password)))
		case *githttp.TokenAuth:
			out = append(out, a.Token)
		}
	}
	return out
}
