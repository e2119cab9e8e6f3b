package daemontest

import (
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

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

// Start gives a daemon with no addresses loopback ports and a data folder,
// where its tokens are.
func TestStartFillsLoopbackAndDataDir(t *testing.T) {
	d := Start(t, daemon.Options{})
	for _, addr := range []string{d.XDS, d.Admin} {
		if host, _, err := net.SplitHostPort(addr); err != nil || host != "127.0.0.1" {
			t.Errorf("bound %q, want a port on 127.0.0.1", addr)
		}
	}
	if d.DataDir == "" || d.Token(t, "read-token") == "" {
		t.Errorf("no read token in the data folder %q", d.DataDir)
	}
}

// Refusal returns the error a daemon refuses to start with.
func TestRefusalReturnsTheError(t *testing.T) {
	err := Refusal(t, FileMode(filepath.Join(t.TempDir(), "missing.yaml")))
	if err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Fatalf("Refusal: %v, want an error naming the missing file", err)
	}
}

// WaitFor returns once a line written by another goroutine holds the
// string, and Keep keeps only the tail.
func TestLogBufferWaitForAndKeep(t *testing.T) {
	l := &LogBuffer{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.Logger().Info("first")
		l.Logger().Info("the line", "k", "v")
	}()
	l.WaitFor(t, "k=v", 5*time.Second)
	<-done
	k := &LogBuffer{Keep: 4}
	fmt.Fprint(k, "abcdef")
	fmt.Fprint(k, "gh")
	if got := k.String(); got != "efgh" {
		t.Fatalf("kept %q, want efgh", got)
	}
}
