package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkStart starts pylonctl and pylon, each built here from this
// tree, b.N times each: with `apply --help` (the process's start and
// exit: its packages' inits, the command line built, the help printed),
// and with a real `apply --dry-run` of a small document to a pylon serve
// (in this process, on loopback). It reports the median (ms-median) and,
// for --help, what one start's package inits take by
// GODEBUG=inittrace=1 (init-ms):
//
//	go test -run '^$' -bench Start -benchtime 30x ./cmd/pylonctl
func BenchmarkStart(b *testing.B) {
	dir := b.TempDir()
	doc := filepath.Join(dir, "shop.yaml")
	if err := os.WriteFile(doc, []byte(shopConfig), 0o600); err != nil {
		b.Fatal(err)
	}
	s := startServe(b)
	for _, prog := range []string{"pylonctl", "pylon"} {
		bin := filepath.Join(dir, prog)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "../../cmd/"+prog).CombinedOutput()
		cancel()
		if err != nil {
			b.Fatalf("go build %s: %v\n%s", prog, err, out)
		}
		b.Run(prog+"/help", func(b *testing.B) {
			b.ReportMetric(medianStart(b, bin, "apply", "--help"), "ms-median")
			b.ReportMetric(initMillis(startOnce(b, bin, []string{"GODEBUG=inittrace=1"}, "apply", "--help")), "init-ms")
		})
		b.Run(prog+"/apply", func(b *testing.B) {
			b.ReportMetric(medianStart(b, bin, "apply", doc, "--dry-run", "--admin-addr", s.admin, "--data-dir", s.dataDir), "ms-median")
		})
	}
}

// medianStart runs bin with args b.N times and returns the median run,
// in milliseconds.
func medianStart(b *testing.B, bin string, args ...string) float64 {
	took := make([]time.Duration, 0, b.N)
	for b.Loop() {
		start := time.Now()
		startOnce(b, bin, nil, args...)
		took = append(took, time.Since(start))
	}
	slices.Sort(took)
	return float64(took[len(took)/2].Microseconds()) / 1000
}

// startOnce runs bin with args, within a bound, and returns its stderr.
func startOnce(b *testing.B, bin string, env []string, args ...string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		b.Fatalf("%s %v: %v\n%s", bin, args, err, stderr.String())
	}
	return stderr.String()
}

// initMillis sums the clock times of inittrace's lines: "init PKG @T ms,
// D ms clock, ...".
func initMillis(trace string) float64 {
	var sum float64
	for _, l := range strings.Split(trace, "\n") {
		f := strings.Fields(l)
		if len(f) >= 7 && f[0] == "init" && f[6] == "clock," {
			if d, err := strconv.ParseFloat(f[4], 64); err == nil {
				sum += d
			}
		}
	}
	return sum
}
