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
// tree, b.N times each with `apply --help` (the process's start and exit:
// its packages' inits, the command line built, the help printed) and
// reports the median start (ms-median) and what one start's package
// inits take by GODEBUG=inittrace=1 (init-ms):
//
//	go test -run '^$' -bench Start -benchtime 30x ./cmd/pylonctl
func BenchmarkStart(b *testing.B) {
	dir := b.TempDir()
	for _, prog := range []string{"pylonctl", "pylon"} {
		bin := filepath.Join(dir, prog)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "../../cmd/"+prog).CombinedOutput()
		cancel()
		if err != nil {
			b.Fatalf("go build %s: %v\n%s", prog, err, out)
		}
		b.Run(prog, func(b *testing.B) {
			took := make([]time.Duration, 0, b.N)
			for b.Loop() {
				start := time.Now()
				startOnce(b, bin, nil)
				took = append(took, time.Since(start))
			}
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "ms-median")
			b.ReportMetric(initMillis(startOnce(b, bin, []string{"GODEBUG=inittrace=1"})), "init-ms")
		})
	}
}

// startOnce runs bin apply --help, within a bound, and returns its stderr.
func startOnce(b *testing.B, bin string, env []string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "apply", "--help")
	cmd.Env = append(os.Environ(), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		b.Fatalf("%s apply --help: %v\n%s", bin, err, stderr.String())
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
