package main

import (
	"math"
	"os"
	"testing"
)

// Busy is user, nice, system and steal, not idle, iowait or interrupts;
// a line that is not the machine's total reads as nothing.
func TestParseCPULine(t *testing.T) {
	for _, c := range []struct {
		line        string
		busy, steal float64
	}{
		{"cpu  100 1 20 5000 30 2 4 5 0 0", 1.26, 0.05},
		{"cpu0 100 1 20 5000 30 0 4 5 0 0", 0, 0},
		{"cpu 1 2", 0, 0},
	} {
		busy, steal := parseCPULine(c.line)
		if math.Abs(busy-c.busy) > 1e-9 || math.Abs(steal-c.steal) > 1e-9 {
			t.Errorf("parseCPULine(%q) = %v, %v; want %v, %v", c.line, busy, steal, c.busy, c.steal)
		}
	}
}

// Only what neither the server nor the driver used is named, the stolen
// part apart, and nothing under a tenth of a second; reclaim when there
// was any.
func TestElsewhere(t *testing.T) {
	for _, c := range []struct {
		from, to machineShare
		used     float64
		want     string
	}{
		{machineShare{10, 1, 7}, machineShare{15, 1, 7}, 4.95, ""},
		{machineShare{10, 1, 0}, machineShare{17, 1, 0}, 5, "; other processes 2.0 s, stolen 0.0 s"},
		{machineShare{10, 1, 0}, machineShare{17, 2.5, 0}, 5, "; other processes 0.5 s, stolen 1.5 s"},
		{machineShare{10, 1, 100}, machineShare{15, 1, 350}, 5, "; direct reclaim scanned 250 pages"},
	} {
		if got := elsewhere(c.from, c.to, c.used); got != c.want {
			t.Errorf("elsewhere(%v) = %q, want %q", c, got, c.want)
		}
	}
}

// A thread's CPU is read to the nanosecond, and grows as it works.
func TestThreadsCPU(t *testing.T) {
	if _, err := os.Stat("/proc/self/task"); err != nil {
		t.Skip("no /proc here")
	}
	before := threadsCPU(os.Getpid())
	x := 0
	for i := range 50_000_000 {
		x += i % 7
	}
	if after := threadsCPU(os.Getpid()); after <= before || x == 0 {
		t.Errorf("threadsCPU went from %v to %v over a busy loop", before, after)
	}
}

// A field of /proc/vmstat is found by its whole name.
func TestVmstatField(t *testing.T) {
	text := "pgscan_direct_throttle 4\npgscan_direct 1234\nallocstall_movable 9\n"
	if got := vmstatField(text, "pgscan_direct"); got != 1234 {
		t.Errorf("pgscan_direct = %v, want 1234", got)
	}
	if got := vmstatField(text, "pgscan"); got != 0 {
		t.Errorf("pgscan = %v, want 0 (absent)", got)
	}
}

// The A/B scenario compares two servers over at least two changes, on
// its own.
func TestCheckAB(t *testing.T) {
	for _, c := range []struct {
		impls    string
		eds      int
		scenario bool
		ok       bool
	}{
		{"pylon-unobserved,pylon", 2, false, true},
		{"pylon", 2, false, false},
		{"pylon,gcp,pylon-unobserved", 2, false, false},
		{"pylon,gcp", 1, false, false},
		{"pylon,gcp", 10, true, false},
	} {
		if got := checkAB(c.impls, c.eds, c.scenario); (got == "") != c.ok {
			t.Errorf("checkAB(%q, %d, %v) = %q", c.impls, c.eds, c.scenario, got)
		}
	}
}

// The sides take turns in pairs, each first in every other pair.
func TestABTurn(t *testing.T) {
	want := []int{0, 1, 1, 0, 0, 1, 1, 0}
	for k, w := range want {
		if got := abTurn(k); got != w {
			t.Errorf("abTurn(%d) = %d, want %d", k, got, w)
		}
	}
}
