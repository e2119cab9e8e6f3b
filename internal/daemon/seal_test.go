package daemon_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pylon-xds/pylon/internal/daemon"
	"github.com/pylon-xds/pylon/internal/daemon/daemontest"
	"github.com/pylon-xds/pylon/internal/seal"
)

const daemonMarker = "pylon-daemon-at-rest-marker-c41d"

// markerIn says how raw shows daemonMarker: in clear, as base64 at any
// alignment, or "" when it does not.
func markerIn(raw []byte) string {
	if bytes.Contains(raw, []byte(daemonMarker)) {
		return "in clear"
	}
	for off := range 3 {
		enc := base64.StdEncoding.EncodeToString(append(bytes.Repeat([]byte("-"), off), daemonMarker...))
		if bytes.Contains(raw, []byte(enc[(off+2)/3*4+4:len(enc)-4])) {
			return "as base64"
		}
	}
	return ""
}

// secretDoc is a config with a raw Secret whose private key holds the
// marker, as a string and as bytes.
func secretDoc(n string) []byte {
	pem := "-----BEGIN PRIVATE KEY-----\n" + daemonMarker + n + "\n-----END PRIVATE KEY-----\n"
	js := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	secret := func(name, key string) string {
		return `{"@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret", "name": "` + name + `",
   "tlsCertificate": {"certificateChain": {"inlineString": "PUBLIC-CERT"}, "privateKey": ` + key + `}}`
	}
	return []byte(`{"resources": [` + secret("as-string", `{"inlineString": `+js(pem)+`}`) + `,` +
		secret("as-bytes", `{"inlineBytes": `+js(base64.StdEncoding.EncodeToString([]byte(pem)))+`}`) + `]}`)
}

func apply(t *testing.T, d *daemontest.Daemon, token string, doc []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+d.Admin+"/v1/apply", bytes.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("apply: %d %s", resp.StatusCode, body)
	}
}

func keyLine(t *testing.T, name string) string {
	t.Helper()
	b := make([]byte, seal.KeyBytes)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return name + ":" + base64.StdEncoding.EncodeToString(b)
}

func writeKeys(t *testing.T, path string, lines ...string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestEncryptionAtRest_DaemonStoreAndRotation: Secrets written through
// the admin API with --encryption-key-file leave nothing of their keys in
// the bbolt file, current or in the history; the daemon refuses to start
// on it without the key, naming the flag; a key file listing a new key
// then the old one starts it and seals everything again under the new
// key, after which the new key alone starts it. No key reaches the log.
func TestEncryptionAtRest_DaemonStoreAndRotation(t *testing.T) {
	dir := t.TempDir()
	data, keys := filepath.Join(dir, "data"), filepath.Join(dir, "keys")
	k1, k2 := keyLine(t, "k1"), keyLine(t, "k2")
	writeKeys(t, keys, k1)
	var logs daemontest.LogBuffer
	o := daemon.Options{DataDir: data, XDSAddr: "127.0.0.1:0", AdminAddr: "127.0.0.1:0", EncryptionKeyFile: keys,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	d := daemontest.Start(t, o)
	token, err := os.ReadFile(filepath.Join(data, "admin-token"))
	if err != nil {
		t.Fatal(err)
	}
	apply(t, d, strings.TrimSpace(string(token)), secretDoc("1"))
	apply(t, d, strings.TrimSpace(string(token)), secretDoc("2"))
	d.Stop(t)
	raw, err := os.ReadFile(filepath.Join(data, "pylon.db"))
	if err != nil {
		t.Fatal(err)
	}
	if where := markerIn(raw); where != "" {
		t.Fatalf("the bbolt file shows a Secret's private key %s", where)
	}

	noKey := o
	noKey.EncryptionKeyFile = ""
	err = daemon.Run(context.Background(), noKey)
	if err == nil || !strings.Contains(err.Error(), seal.Flag) || !strings.Contains(err.Error(), `"k1"`) {
		t.Fatalf("start without the key: %v", err)
	}

	writeKeys(t, keys, k2, k1)
	daemontest.Start(t, o).Stop(t)
	if !strings.Contains(logs.String(), "stored values sealed again") {
		t.Fatalf("no reseal logged on a new first key:\n%s", logs.String())
	}
	raw, err = os.ReadFile(filepath.Join(data, "pylon.db"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, []byte(seal.Prefix+"k1:")) || !bytes.Contains(raw, []byte(seal.Prefix+"k2:")) {
		t.Fatal("after a start with [k2 k1], values are still under k1")
	}
	writeKeys(t, keys, k2)
	daemontest.Start(t, o).Stop(t)
	for _, k := range []string{k1, k2} {
		if secret := strings.SplitN(k, ":", 2)[1]; strings.Contains(logs.String(), secret) {
			t.Fatal("a key is in the log")
		}
	}
}
