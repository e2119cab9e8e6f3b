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
// irq softirq steal ..., in ticks of 10 ms; busy is all but idle and
// iowait.
func parseCPULine(line string) (busy, steal float64) {
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, 0
	}
	var ticks [8]float64
	for i := range ticks {
		ticks[i], _ = strconv.ParseFloat(f[i+1], 64)
	}
	busy = ticks[0] + ticks[1] + ticks[2] + ticks[5] + ticks[6] + ticks[7]
	return busy / 100, ticks[7] / 100
}

// elsewhere says what of the machine's CPU between two readings
// (machineCPU) was neither the server's nor the driver's (used: their
// sum), and what the hypervisor stole, when either is over a tenth of a
// second: "" otherwise.
func elsewhere(busy0, steal0, busy1, steal1, used float64) string {
	others, steal := busy1-busy0-used, steal1-steal0
	if others < 0.1 && steal < 0.1 {
		return ""
	}
	return fmt.Sprintf("; other processes %.1f s, stolen %.1f s", max(others-steal, 0), steal)
}
