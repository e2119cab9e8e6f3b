package git

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	gogit "github.com/go-git/go-git/v5"
	gitconfig "github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
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
	return pinnedSSH{auth, hosts.HostKeyAlgorithms(net.JoinHostPort(u.Hostname(), port)), s.o.Timeout}, nil
}

// pinnedSSH is an SSH key that asks the host for the key types pinned for
// it (a host with keys of several types shows the one known_hosts has),
// and bounds the TCP connect by the poll's timeout: go-git's SSH transport
// takes no context until it is connected.
type pinnedSSH struct {
	*gitssh.PublicKeys
	algorithms []string
	timeout    time.Duration
}

func (a pinnedSSH) ClientConfig() (*cryptossh.ClientConfig, error) {
	c, err := a.PublicKeys.ClientConfig()
	if err != nil {
		return nil, err
	}
	c.HostKeyAlgorithms, c.Timeout = a.algorithms, a.timeout
	return c, nil
}

// list finds the ref on the remote, without fetching anything: a poll of
// an unmoved ref costs one ref advertisement.
func (s *Source) list(ctx context.Context, auth transport.AuthMethod) (string, plumbing.Hash, error) {
	remote := gogit.NewRemote(memory.NewStorage(), &gitconfig.RemoteConfig{Name: "origin", URLs: []string{s.o.URL}})
	refs, err := remote.ListContext(ctx, &gogit.ListOptions{Auth: auth})
	if err != nil {
		return "", plumbing.ZeroHash, fmt.Errorf("git %s: listing refs: %w", s.shown, err)
	}
	want := []string{s.o.Ref}
	if !strings.HasPrefix(s.o.Ref, "refs/") {
		want = []string{"refs/heads/" + s.o.Ref, "refs/tags/" + s.o.Ref}
	}
	for _, name := range want {
		for _, r := range refs {
			if r.Name().String() == name && r.Type() == plumbing.HashReference {
				return name, r.Hash(), nil
			}
		}
	}
	return "", plumbing.ZeroHash, fmt.Errorf("git %s: no branch or tag %q (it may have been deleted)", s.shown, s.o.Ref)
}

// read fetches the commit ref points to (that commit alone: depth 1, into
// memory) and reads the folder at it. rev is the commit's SHA.
func (s *Source) read(ctx context.Context, auth transport.AuthMethod, ref string, hash plumbing.Hash) (files []config.File, rev string, err error) {
	repo, err := gogit.CloneContext(ctx, &bounded{Storage: memory.NewStorage(), left: s.o.MaxBytes}, nil, &gogit.CloneOptions{
		URL: s.o.URL, Auth: auth, ReferenceName: plumbing.ReferenceName(ref),
		SingleBranch: true, Depth: 1, NoCheckout: true, Tags: gogit.NoTags,
	})
	if errors.Is(err, errTooBig) {
		return nil, "", fmt.Errorf("git %s: fetching %s: the commit's objects are over the limit of %d KiB", s.shown, ref, s.o.MaxBytes>>10)
	}
	if err != nil {
		return nil, "", fmt.Errorf("git %s: fetching %s: %w", s.shown, ref, err)
	}
	commit, err := commitOf(repo, hash)
	if err != nil {
		return nil, "", fmt.Errorf("git %s: %s: %w", s.shown, ref, err)
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
	files, err = source.ReadFolder(treeFS{tree}, where, "")
	if err != nil {
		return nil, rev, fmt.Errorf("git commit %s: %w", rev, err)
	}
	return files, rev, nil
}

// errTooBig is a fetch over Options.MaxBytes.
var errTooBig = errors.New("over the fetch limit")

// bounded is the memory a fetch writes its objects to, refusing them once
// they are over a bound: a repository that grew a large file (or a host
// that sends without end) is refused rather than held.
type bounded struct {
	*memory.Storage
	left int64
}

func (b *bounded) SetEncodedObject(o plumbing.EncodedObject) (plumbing.Hash, error) {
	if b.left -= o.Size(); b.left < 0 {
		return plumbing.ZeroHash, errTooBig
	}
	return b.Storage.SetEncodedObject(o)
}

// commitOf is the commit hash names: itself, or the one an annotated tag
// points to.
func commitOf(repo *gogit.Repository, hash plumbing.Hash) (*object.Commit, error) {
	if c, err := repo.CommitObject(hash); err == nil {
		return c, nil
	}
	tag, err := repo.TagObject(hash)
	if err != nil {
		return nil, fmt.Errorf("%s is neither a commit nor a tag", hash)
	}
	return tag.Commit()
}

// scrub is err as shown: the URL's password and the credentials never
// appear in it, and a timeout says which.
func (s *Source) scrub(ctx context.Context, err error) error {
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
		return fmt.Errorf("git %s: no answer within %s", s.shown, s.o.Timeout)
	}
	msg := strings.TrimSpace(err.Error())
	secrets := []string{}
	if u, perr := url.Parse(s.o.URL); perr == nil && u.User != nil {
		msg = strings.ReplaceAll(msg, s.o.URL, s.shown)
		if p, ok := u.User.Password(); ok {
			secrets = append(secrets, p, url.QueryEscape(p), url.PathEscape(p))
		}
	}
	if auth, aerr := s.auth(); aerr == nil {
		switch a := auth.(type) {
		case *githttp.BasicAuth:
			secrets = append(secrets, a.Password)
		case *githttp.TokenAuth:
			secrets = append(secrets, a.Token)
		}
	}
	for _, p := range secrets {
		if len(p) >= 4 {
			msg = strings.ReplaceAll(msg, p, "[redacted]")
		}
	}
	if errors.Is(err, transport.ErrAuthenticationRequired) || errors.Is(err, transport.ErrAuthorizationFailed) {
		msg += " (check --git-credentials-file)"
	}
	return errors.New(msg)
}

// loopback reports whether host is a loopback address or localhost.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
