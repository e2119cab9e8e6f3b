package daemontest

import (
	"net"
	"testing"

	"go.uber.org/goleak"

	"github.com/pylon-xds/pylon/internal/daemon"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Start returns once both listeners answer; Stop ends the daemon (and
// every goroutine it had), and a second Stop does nothing.
func TestStartStop(t *testing.T) {
	d := Start(t, daemon.Options{DataDir: t.TempDir(), XDSAddr: "127.0.0.1:0", AdminAddr: "127.0.0.1:0"})
	for _, addr := range []string{d.XDS, d.Admin} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("%s: %v", addr, err)
		}
		c.Close()
	}
	d.Stop(t)
	d.Stop(t)
	if c, err := net.Dial("tcp", d.XDS); err == nil {
		c.Close()
		t.Fatal("the xDS port still answers after Stop")
	}
}
