package deploy_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

const (
	unitFile   = "systemd/pylon.service"
	tlsDropIn  = "systemd/tls.conf"
	pylonPath  = "/usr/local/bin/pylon"
	unitData   = "/var/lib/pylon"
	unitAnswer = 30 * time.Second
)

// unitSetting is one Key=Value of a unit file.
type unitSetting struct {
	section, key, value string
	line                int
}

// parseUnit reads a systemd unit file's settings in order: comments and
// blank lines skipped, backslash continuations joined.
func parseUnit(t *testing.T, path string) []unitSetting {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []unitSetting
	section, cur, start, n := "", "", 0, 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if cur == "" && (line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";")) {
			continue
		}
		if cur == "" && strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]") {
			section = line[1 : len(line)-1]
			continue
		}
		if cur == "" {
			start = n
		}
		if body, ok := strings.CutSuffix(line, `\`); ok {
			cur += body + " "
			continue
		}
		cur += line
		key, value, ok := strings.Cut(cur, "=")
		if !ok {
			t.Fatalf("%s:%d: %q is no Key=Value", path, start, cur)
		}
		out = append(out, unitSetting{section, strings.TrimSpace(key), strings.TrimSpace(value), start})
		cur = ""
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// lastValue is the value a key ends with in section ("" and false if unset).
func lastValue(s []unitSetting, section, key string) (string, bool) {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i].section == section && s[i].key == key {
			return s[i].value, true
		}
	}
	return "", false
}

// TestSystemdUnit checks the shipped unit and its TLS drop-in: the
// hardening options, the state directory serve keeps its data in, and
// every flag of each ExecStart against pylon serve --help.
func TestSystemdUnit(t *testing.T) {
	unit := parseUnit(t, unitFile)
	for key, want := range map[string]string{
		"NoNewPrivileges": "yes", "ProtectSystem": "strict", "ProtectHome": "yes", "PrivateTmp": "yes",
		"StateDirectory": "pylon", "DynamicUser": "yes", "CapabilityBoundingSet": "", "AmbientCapabilities": "",
		"MemoryDenyWriteExecute": "yes", "RestrictAddressFamilies": "AF_INET AF_INET6 AF_UNIX", "PrivateDevices": "yes",
		"RestrictNamespaces": "yes", "RestrictSUIDSGID": "yes", "LockPersonality": "yes", "SystemCallArchitectures": "native",
		"ProtectKernelTunables": "yes", "ProtectKernelModules": "yes", "ProtectControlGroups": "yes", "UMask": "0077",
	} {
		if got, ok := lastValue(unit, "Service", key); !ok || got != want {
			t.Errorf("%s: [Service] %s=%q (set: %v), want %q", unitFile, key, got, ok, want)
		}
	}
	filters := []string{}
	for _, s := range unit {
		if s.section == "Service" && s.key == "SystemCallFilter" {
			filters = append(filters, s.value)
		}
	}
	if !slices.Contains(filters, "@system-service") {
		t.Errorf("%s: SystemCallFilter %v: want @system-service", unitFile, filters)
	}
	flags := serveFlags(t)
	for _, file := range []string{unitFile, tlsDropIn} {
		cmd, ok := lastValue(parseUnit(t, file), "Service", "ExecStart")
		if !ok || cmd == "" {
			t.Errorf("%s: no ExecStart", file)
			continue
		}
		checkExecStart(t, file, cmd, flags)
	}
}

// checkExecStart checks a unit's command: pylon serve with flags serve
// has, its data in the unit's state directory. $VARIABLES (flags from the
// environment file) are left out.
func checkExecStart(t *testing.T, file, exec string, flags map[string]bool) {
	t.Helper()
	argv := strings.Fields(exec)
	if len(argv) < 2 || argv[0] != pylonPath || argv[1] != "serve" {
		t.Fatalf("%s: ExecStart=%s: want %s serve ...", file, exec, pylonPath)
	}
	var args []string
	for _, a := range argv[2:] {
		if !strings.HasPrefix(a, "$") {
			args = append(args, a)
		}
	}
	checkServeArgs(t, file+" ExecStart", args, flags)
	if !slices.Contains(args, "--data-dir="+unitData) {
		t.Errorf("%s: ExecStart has no --data-dir=%s, the unit's StateDirectory", file, unitData)
	}
}

// TestSystemdAnalyzeVerify runs systemd-analyze verify on the unit alone
// and with its TLS drop-in (appended: a drop-in's settings add to the
// unit's as if written there). verify exits 0 on an unknown key or a value
// it cannot parse, saying so on stderr: any output fails. The pylon binary
// is not installed here, so the copies verified run this test's own
// executable instead: verify checks that the command exists.
// Without systemd-analyze (Debian package systemd) the test skips, except
// in CI (CI=true), where .ci/run installs it. It needs no running systemd.
func TestSystemdAnalyzeVerify(t *testing.T) {
	bin, err := exec.LookPath("systemd-analyze")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("systemd-analyze is not installed: CI must install it (apt-get install systemd) to verify the shipped unit")
		}
		t.Skip("systemd-analyze is not installed (Debian package systemd); the unit is checked by parsing only")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	unit, err := os.ReadFile(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	dropIn, err := os.ReadFile(tlsDropIn)
	if err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{"unit": string(unit), "unit with tls.conf": string(unit) + "\n" + string(dropIn)} {
		path := filepath.Join(t.TempDir(), "pylon.service")
		if err := os.WriteFile(path, []byte(strings.ReplaceAll(text, pylonPath, self)), 0o644); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), unitAnswer)
		out, err := exec.CommandContext(ctx, bin, "verify", path).CombinedOutput()
		cancel()
		if err != nil || len(strings.TrimSpace(string(out))) > 0 {
			t.Errorf("systemd-analyze verify, %s: %v\n%s", name, err, out)
		}
	}
}
