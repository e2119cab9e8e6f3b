package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/pylon-xds/pylon/internal/cli"
	"github.com/pylon-xds/pylon/internal/ctl"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// served is a `pylon serve` run in process (store mode, the embedded
// store, loopback ports), until the test ends.
type served struct{ admin, dataDir string }

func startServe(t testing.TB) served {
	t.Helper()
	s := served{dataDir: t.TempDir()}
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- cli.Execute(ctx, []string{"serve", "--xds-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0",
			"--data-dir", s.dataDir, "--log-format", "json"}, io.Discard, pw)
		pw.Close()
	}()
	lines := bufio.NewScanner(pr)
	for lines.Scan() {
		var rec map[string]any
		if json.Unmarshal(lines.Bytes(), &rec) == nil && rec["msg"] == "pylon serving" {
			s.admin, _ = rec["admin"].(string)
			break
		}
	}
	drained := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, pr); close(drained) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			t.Error("serve did not stop")
		}
		<-drained
	})
	if s.admin == "" {
		cancel()
		t.Fatalf("serve never logged its addresses (exit %d)", <-done)
	}
	return s
}

// run runs a command line (pylonctl's or pylon's) against s, with no
// environment but the flags.
type commandLine func(ctx context.Context, args []string, stdout, stderr io.Writer) int

func (s served) run(cl commandLine, args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	args = append(args, "--admin-addr", s.admin, "--data-dir", s.dataDir)
	code = cl(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func pylonctl(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return ctl.Execute(ctx, args, stdout, stderr, func(string) string { return "" })
}

func pylon(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return cli.Execute(ctx, args, stdout, stderr)
}

const shopConfig = `services:
- name: shop
  endpoints: [{ address: 10.0.0.1, port: 8080 }]
routes:
- name: shop
  virtual_hosts: [{ name: shop, domains: ["*"], routes: [{ to: [{ service: shop }] }] }]
listeners:
- { name: shop, port: 10080, routes: shop }
`

// pylonctl apply, against a real pylon serve, stores the document and
// prints what pylon apply prints against a serve in the same state; a
// refusal says what pylon's says (but for the program's name).
func TestApplyPrintsWhatPylonApplyPrints(t *testing.T) {
	dir := t.TempDir()
	doc := filepath.Join(dir, "shop.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(doc, []byte(shopConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("listeners:\n- { name: shop, port: 10080, routes: nowhere }\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	byCtl, byPylon := startServe(t), startServe(t)
	for _, args := range [][]string{{"apply", doc, "--dry-run"}, {"apply", "-f", doc}, {"apply", bad}, {"delete", "listeners", "shop"}} {
		code, out, stderr := byCtl.run(pylonctl, args...)
		wantCode, wantOut, wantErr := byPylon.run(pylon, args...)
		if args[1] == "-f" && !regexp.MustCompile(`^stored as revision \d+\nfleet version [0-9a-f]+\n`).MatchString(out) {
			t.Errorf("pylonctl %v does not say what it stored:\n%s%s", args, out, stderr)
		}
		if code != wantCode || out != wantOut || strings.TrimPrefix(stderr, "pylonctl: ") != strings.TrimPrefix(wantErr, "pylon: ") {
			t.Errorf("pylonctl %v: exit %d\n%s%s\npylon %v: exit %d\n%s%s", args, code, out, stderr, args, wantCode, wantOut, wantErr)
		}
	}
	_, objs, _ := byCtl.run(pylon, "get", "objects")
	if !regexp.MustCompile(`(?m)^services\s+shop\b|services/shop`).MatchString(objs) {
		t.Errorf("pylon get objects after pylonctl apply lacks services/shop:\n%s", objs)
	}
}

// pylonctl version says what it is, from the build info, as pylon's does.
func TestVersionNamesPylonctl(t *testing.T) {
	var out, errb bytes.Buffer
	if code := pylonctl(context.Background(), []string{"version"}, &out, &errb); code != 0 || !strings.HasPrefix(out.String(), "pylonctl ") || !strings.Contains(out.String(), "go1.") {
		t.Fatalf("pylonctl version: exit %d, %q %q", code, out.String(), errb.String())
	}
}
