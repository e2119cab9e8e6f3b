// Package seal encrypts values at rest: AES-256-GCM envelopes under a
// keyring read from a key file, for what Pylon writes to its stores (bbolt,
// etcd) and its rollout state file. The first key seals; every key opens,
// so that a key can be rotated without making what is stored unreadable.
//
// An envelope is
//
//	pylon:aesgcm:v1:<key name>:<12-byte nonce><ciphertext and 16-byte tag>
//
// It names the key that sealed it, so that a value is opened by that key
// and a value sealed under an older key is found and sealed again. The
// caller's context (the record's key or path) is the additional data: a
// ciphertext moved to another record does not open. A value without the
// prefix is clear text, read as it is: a store written before a key was
// configured stays readable, and is sealed by Reseal.
package seal

import (
	"bufio"
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Prefix starts every sealed value.
const Prefix = "pylon:aesgcm:v1:"

// Bounds on the key file.
const (
	MaxFileBytes = 64 << 10
	MaxKeys      = 64
	KeyBytes     = 32 // AES-256
	nonceBytes   = 12
)

// Flag is the serve flag naming the key file, for error messages.
const Flag = "--encryption-key-file"

// GenerateCommand makes a key file with one new key, readable by its
// owner only, as the docs show it.
const GenerateCommand = `(umask 077 && printf 'k1:%s\n' "$(head -c 32 /dev/urandom | base64)" > pylon.key)`

var validName = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// Errors Open returns (wrapped with the record and key named).
var (
	// ErrNoKey: a sealed value, and no keyring.
	ErrNoKey = errors.New("sealed value and no encryption key")
	// ErrUnknownKey: sealed under a key the keyring does not hold.
	ErrUnknownKey = errors.New("sealed under a key not in the key file")
	// ErrDamaged: the value does not authenticate: altered, truncated
	// or moved from another record.
	ErrDamaged = errors.New("sealed value does not authenticate")
)

type key struct {
	name string
	aead cipher.AEAD
}

// Keyring holds the keys of a key file: the first seals, all open. A nil
// *Keyring seals nothing and opens clear values only. It is immutable and
// safe for concurrent use.
type Keyring struct {
	keys []key
}

// Load reads a key file: at most MaxFileBytes, a regular file that only
// its owner can read (like the admin token files), never through a link.
func Load(path string) (*Keyring, error) {
	b, err := ReadPrivate(path, Flag, MaxFileBytes)
	if err != nil {
		return nil, err
	}
	return Parse(b, path)
}

// Parse reads a key file's content: one key a line, "name:base64 of 32
// bytes"; blank lines and lines starting with # are ignored. Errors name
// source, line and key name, never the key.
func Parse(data []byte, source string) (*Keyring, error) {
	r := &Keyring{}
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), MaxFileBytes)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		where := fmt.Sprintf("%s %s:%d", Flag, source, line)
		name, b64, ok := strings.Cut(text, ":")
		if !ok || !validName.MatchString(name) {
			return nil, fmt.Errorf("%s: want name:base64-key, the name of letters, digits, '.', '_' or '-' (at most 64); generate a key file with: %s", where, GenerateCommand)
		}
		if seen[name] {
			return nil, fmt.Errorf("%s: key %q listed twice", where, name)
		}
		raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(b64))
		if err != nil {
			return nil, fmt.Errorf("%s: key %q is not base64 (standard, padded)", where, name)
		}
		if len(raw) != KeyBytes {
			return nil, fmt.Errorf("%s: key %q is %d bytes; AES-256 needs %d (generate one with: %s)", where, name, len(raw), KeyBytes, GenerateCommand)
		}
		block, err := aes.NewCipher(raw)
		clear(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: key %q: %w", where, name, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("%s: key %q: %w", where, name, err)
		}
		if len(r.keys) == MaxKeys {
			return nil, fmt.Errorf("%s: more than %d keys", where, MaxKeys)
		}
		seen[name] = true
		r.keys = append(r.keys, key{name: name, aead: aead})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s %s: %w", Flag, source, err)
	}
	if len(r.keys) == 0 {
		return nil, fmt.Errorf("%s %s: no key (one a line, name:base64; generate one with: %s)", Flag, source, GenerateCommand)
	}
	return r, nil
}

// Primary is the name of the key that seals; "" for a nil keyring.
func (r *Keyring) Primary() string {
	if r == nil {
		return ""
	}
	return r.keys[0].name
}

// Names lists the keys, the sealing one first.
func (r *Keyring) Names() []string {
	if r == nil {
		return nil
	}
	out := make([]string, len(r.keys))
	for i, k := range r.keys {
		out[i] = k.name
	}
	return out
}

// Seal returns plain sealed under the first key with context as the
// additional data; a nil keyring returns plain itself.
func (r *Keyring) Seal(context string, plain []byte) []byte {
	if r == nil {
		return plain
	}
	k := r.keys[0]
	head := Prefix + k.name + ":"
	out := make([]byte, len(head)+nonceBytes, len(head)+nonceBytes+len(plain)+k.aead.Overhead())
	copy(out, head)
	nonce := out[len(head):]
	if _, err := rand.Read(nonce); err != nil {
		panic("seal: no randomness: " + err.Error()) // crypto/rand does not fail on supported systems
	}
	return k.aead.Seal(out, nonce, plain, []byte(context))
}

// IsSealed reports whether v is an envelope (of any key).
func IsSealed(v []byte) bool { return bytes.HasPrefix(v, []byte(Prefix)) }

// KeyName is the name of the key that sealed v; ok false for clear text.
func KeyName(v []byte) (name string, ok bool) {
	rest, ok := bytes.CutPrefix(v, []byte(Prefix))
	if !ok {
		return "", false
	}
	n, _, ok := bytes.Cut(rest, []byte(":"))
	return string(n), ok
}

// Current reports whether v needs no resealing: sealed under the first
// key, or clear text with no keyring.
func (r *Keyring) Current(v []byte) bool {
	name, sealed := KeyName(v)
	if r == nil {
		return !sealed
	}
	return sealed && name == r.keys[0].name
}

// Open returns the clear text of v: v itself when it is clear text, else
// the envelope opened with the key it names and context. The error names
// context and the key (never its bytes) and says what to do.
func (r *Keyring) Open(context string, v []byte) ([]byte, error) {
	if !IsSealed(v) {
		return v, nil
	}
	name, ok := KeyName(v)
	if !ok {
		return nil, fmt.Errorf("%s: %w: a damaged envelope (no key name)", context, ErrDamaged)
	}
	if r == nil {
		return nil, fmt.Errorf("%s: %w: it is sealed with key %q; start pylon with %s naming a file that holds that key", context, ErrNoKey, name, Flag)
	}
	for _, k := range r.keys {
		if k.name != name {
			continue
		}
		body := v[len(Prefix)+len(name)+1:]
		if len(body) < nonceBytes+k.aead.Overhead() {
			return nil, fmt.Errorf("%s: %w: truncated (key %q)", context, ErrDamaged, name)
		}
		plain, err := k.aead.Open(nil, body[:nonceBytes], body[nonceBytes:], []byte(context))
		if err != nil {
			return nil, fmt.Errorf("%s: %w with key %q: altered, or moved from another record", context, ErrDamaged, name)
		}
		return plain, nil
	}
	return nil, fmt.Errorf("%s: %w: it is sealed with key %q, and %s lists only %s: add that key back (after the first)",
		context, ErrUnknownKey, name, Flag, strings.Join(r.Names(), ", "))
}
