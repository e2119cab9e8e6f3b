package xds_test

import (
	"context"
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/xds"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
)

// ClientCertExpiry is the soonest expiry among the verified client
// certificates of the connections open now: none without one, the
// soonest while several are open, and a closed connection's no longer.
func TestClientCertExpiryIsTheSoonestOfOpenConnections(t *testing.T) {
	m := startMTLS(t, xds.Options{})
	if at, ok := m.srv.XDS.ClientCertExpiry(); ok {
		t.Fatalf("no connection open, yet an expiry: %v", at)
	}
	// A client without a certificate proves nothing and expires nothing.
	anonymous := xdstest.OpenADS(t, m.dial(t, ""), xdstest.Node("anonymous"))
	anonymous.Request(cds)
	anonymous.RecvType(cds)
	if at, ok := m.srv.XDS.ClientCertExpiry(); ok {
		t.Fatalf("only an unverified client is connected, yet an expiry: %v", at)
	}

	soon := m.ca.IssueUntil(t, time.Now().Add(3*time.Hour), edgeSA+"edge-1")
	later := m.ca.IssueUntil(t, time.Now().Add(9*time.Hour), edgeSA+"edge-2")
	soonConn := xdstest.DialTLS(t, m.srv.Addr, m.ca.ClientConfig(&soon))
	for _, open := range []struct {
		s  *xdstest.Stream
		id string
	}{
		{xdstest.OpenADS(t, soonConn, edgeNode("edge-1")), "edge-1"},
		{xdstest.OpenADS(t, xdstest.DialTLS(t, m.srv.Addr, m.ca.ClientConfig(&later)), edgeNode("edge-2")), "edge-2"},
	} {
		open.s.Request(cds)
		open.s.RecvType(cds)
	}
	if at, ok := m.srv.XDS.ClientCertExpiry(); !ok || !at.Equal(soon.Cert.NotAfter) {
		t.Fatalf("expiry %v (%v), want the soonest certificate's %v", at, ok, soon.Cert.NotAfter)
	}

	// Once the soonest one's connection is gone, the later one counts.
	soonConn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), xdstest.Timeout)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		at, ok := m.srv.XDS.ClientCertExpiry()
		if ok && at.Equal(later.Cert.NotAfter) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("after the soonest certificate's connection closed: expiry %v (%v), want %v", at, ok, later.Cert.NotAfter)
		case <-tick.C:
		}
	}
}
