package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// The machine's own account of a measurement: a slow run is Pylon's to
// explain only if the cores were the measurement's. The hypervisor can
// take time from them (steal), and other processes can use them.

// machineCPU is the whole machine's CPU so far, seconds: busy (every core,
// steal included) and steal, from /proc/stat's first line (zero where it
// cannot be read).
func machineCPU() (busy, steal float64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return parseCPULine(line)
}

// parseCPULine reads /proc/stat's "cpu" line: user nice system idle iowait
// irq softirq steal ..., in ticks of 10 ms. Busy is user, nice, system and
// steal: not interrupts, whose time (loopback's packets among it, on a
// kernel that accounts it apart) no process is charged with, and which
// would read as other processes'.
func parseCPULine(line string) (busy, steal float64) {
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, 0
	}
	var ticks [8]float64
	for i := range ticks {
		ticks[i], _ = strconv.ParseFloat(f[i+1], 64)
	}
	busy = ticks[0] + ticks[1] + ticks[2] + ticks[7]
	return busy / 100, ticks[7] / 100
}

// reclaimScanned is how many pages the kernel has scanned so far to free
// memory for an allocation that had to wait for it (direct reclaim,
// /proc/vmstat's pgscan_direct): a process that faults in memory then
// pays for the reclaim in system time.
func reclaimScanned() float64 {
	b, err := os.ReadFile("/proc/vmstat")
	if err != nil {
		return 0
	}
	return vmstatField(string(b), "pgscan_direct")
}

// vmstatField is the value of name in /proc/vmstat's text (0 if absent).
func vmstatField(text, name string) float64 {
	for _, l := range strings.Split(text, "\n") {
		if k, v, ok := strings.Cut(l, " "); ok && k == name {
			n, _ := strconv.ParseFloat(v, 64)
			return n
		}
	}
	return 0
}

// machineShare is a reading of the machine's CPU and reclaim, to compare
// with a later one (elsewhere).
type machineShare struct{ busy, steal, scanned float64 }

func readMachine() machineShare {
	busy, steal := machineCPU()
	return machineShare{busy, steal, reclaimScanned()}
}

// elsewhere says what of the machine's CPU between two readings was
// neither the server's nor the driver's (used: their sum), and what the
// hypervisor stole, when either is over a tenth of a second, and the
// pages direct reclaim scanned, if any: "" when there is nothing to say.
func elsewhere(from, to machineShare, used float64) string {
	others, steal := to.busy-from.busy-used, to.steal-from.steal
	var s string
	if others >= 0.1 || steal >= 0.1 {
		s = fmt.Sprintf("; other processes %.1f s, stolen %.1f s", max(others-steal, 0), steal)
	}
	if n := to.scanned - from.scanned; n > 0 {
		s += fmt.Sprintf("; direct reclaim scanned %.0f pages", n)
	}
	return s
}
