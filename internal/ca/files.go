package ca

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/pylon-xds/pylon/internal/certs"
)

// Modes of written files: a key is its owner's alone; a certificate is
// public.
const (
	keyMode  fs.FileMode = 0o600
	certMode fs.FileMode = 0o644
	dirMode  fs.FileMode = 0o700
)

// errNoDir refuses an empty folder, which would mean the working one
// without saying so.
var errNoDir = errors.New("--dir is empty: name the CA's folder")

// authority is a loaded CA.
type authority struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// trustDomain is the host of the CA's spiffe:// URI SAN, "" if none.
	trustDomain string
}

// load reads the CA in dir, refusing a key file others can read (whoever
// reads it can issue certificates for every node) and a CA that is not
// valid at now.
func load(dir string, now time.Time) (*authority, error) {
	if dir == "" {
		return nil, errNoDir
	}
	certPath, keyPath := filepath.Join(dir, CertFile), filepath.Join(dir, KeyFile)
	certPEMBytes, err := certs.ReadBounded(certPath)
	if err != nil {
		return nil, fmt.Errorf("%w (make a CA with `pylon certs init --dir %s`)", err, dir)
	}
	block, _ := pem.Decode(certPEMBytes)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("%s: no PEM CERTIFICATE block", certPath)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", certPath, err)
	}
	if !cert.IsCA || cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, fmt.Errorf("%s: not a CA certificate (no CA basic constraint or certificate signing usage)", certPath)
	}
	if now.After(cert.NotAfter) || now.Before(cert.NotBefore) {
		return nil, fmt.Errorf("%s: the CA is valid from %s to %s, not now", certPath, cert.NotBefore.UTC().Format(time.RFC3339), cert.NotAfter.UTC().Format(time.RFC3339))
	}
	key, err := loadKey(keyPath)
	if err != nil {
		return nil, err
	}
	if !key.PublicKey.Equal(cert.PublicKey) {
		return nil, fmt.Errorf("%s does not hold the key of %s", keyPath, certPath)
	}
	a := &authority{cert: cert, key: key}
	for _, u := range cert.URIs {
		if u.Scheme == "spiffe" {
			a.trustDomain = u.Host
		}
	}
	return a, nil
}

// loadKey reads an ECDSA key (PKCS #8 or SEC 1). Errors name the file and
// what is wrong with it, never its contents.
func loadKey(path string) (*ecdsa.PrivateKey, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("%s is readable or writable by others (mode %#o): whoever reads it can issue a certificate for any node; chmod 600 it", path, perm)
	}
	b, err := certs.ReadBounded(path)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(b)
	if block == nil {
		return nil, fmt.Errorf("%s: no PEM block", path)
	}
	var parsed any
	switch block.Type {
	case "PRIVATE KEY":
		parsed, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		parsed, err = x509.ParseECPrivateKey(block.Bytes)
	default:
		return nil, fmt.Errorf("%s: a PEM %q block, want PRIVATE KEY or EC PRIVATE KEY", path, block.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: the key does not parse", path)
	}
	key, ok := parsed.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%s: not an ECDSA key", path)
	}
	return key, nil
}

// writePair writes a certificate and its key into dir as certName and
// keyName. Without force, it refuses before writing anything if either
// exists, and never replaces a file (a race loses with an error, not a
// clobbered file). With force, each file is replaced by rename, so that a
// reader sees the old file or the new, never half of one.
func writePair(dir, certName, keyName string, der []byte, key *ecdsa.PrivateKey, force bool) error {
	if dir == "" {
		return errNoDir
	}
	if err := os.MkdirAll(dir, dirMode); err != nil {
		return err
	}
	certPath, keyPath := filepath.Join(dir, certName), filepath.Join(dir, keyName)
	if !force {
		for _, p := range []string{certPath, keyPath} {
			if _, err := os.Lstat(p); err == nil {
				return fmt.Errorf("%s exists; pass --force to replace it", p)
			} else if !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	defer clear(keyPEM)
	if err := writeFile(keyPath, keyPEM, keyMode, force); err != nil {
		return err
	}
	if err := writeFile(certPath, certPEM(der), certMode, force); err != nil {
		if !force {
			os.Remove(keyPath) // ours: created exclusively above
		}
		return err
	}
	return nil
}

// writeFile writes b to path with mode perm: created exclusively, or, with
// replace, through a temporary file renamed over path.
func writeFile(path string, b []byte, perm fs.FileMode, replace bool) error {
	if !replace {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%s exists; pass --force to replace it", path)
		}
		if err != nil {
			return err
		}
		return finish(f, b, path, "")
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	if err := f.Chmod(perm); err != nil {
		f.Close()
		os.Remove(f.Name())
		return err
	}
	return finish(f, b, f.Name(), path)
}

// finish writes b to f (named name), syncs and closes it, then renames it
// to target when target is set. On failure the file is removed.
func finish(f *os.File, b []byte, name, target string) error {
	_, err := io.Copy(f, bytes.NewReader(b))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && target != "" {
		err = os.Rename(name, target)
	}
	if err != nil {
		os.Remove(name)
		return fmt.Errorf("writing %s: %w", name, err)
	}
	return nil
}
