package admin

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Endpoint registrations, renewals and deregistrations have slots of
// their own (maxRegistrationsInFlight): with the general slot held, a
// registration, a renewal by PUT and a deregistration are still served while another call gets 503
// busy; with the registrations' slot held (a body that trickles in),
// the next registration gets 503 busy and other calls are served.
func TestRegistrationsBoundApart(t *testing.T) {
	h := newHarness(t, Options{Token: writeTok}, newLimiterFor(1, 1, 20*time.Millisecond))
	if code, body := h.do(t, "POST", "/v1/apply", writeTok, []byte("services:\n- { name: web, endpoints: [{ address: 10.0.0.1, port: 80 }] }\n")); code != http.StatusOK {
		t.Fatalf("apply: %d %s", code, body)
	}
	release, first := holdSlot(t, h)
	if code, body := h.do(t, "GET", "/v1/objects", writeTok, nil); code != http.StatusServiceUnavailable || !strings.Contains(body, "busy") {
		t.Fatalf("a read past the general bound: %d %s", code, body)
	}
	if code, body := h.do(t, "POST", "/v1/services/web/endpoints", writeTok, []byte(`{"address":"10.0.0.2","port":80}`)); code != http.StatusOK {
		t.Fatalf("a registration with the general slot held: %d %s", code, body)
	}
	if code, body := h.do(t, "PUT", "/v1/services/web/endpoints/10.0.0.2:80", writeTok, []byte(`{"ttl":"30s"}`)); code != http.StatusOK {
		t.Fatalf("a renewal (PUT) with the general slot held: %d %s", code, body)
	}
	if code, body := h.do(t, "DELETE", "/v1/services/web/endpoints/10.0.0.2:80", writeTok, nil); code != http.StatusOK {
		t.Fatalf("a deregistration with the general slot held: %d %s", code, body)
	}
	release()
	if c := <-first; c != http.StatusOK {
		t.Fatalf("the held request: %d", c)
	}
	h.src.entered = nil

	// A registration whose body trickles in holds the registrations' slot.
	// It waits 20 ms at most for the slot: under load one of the probing
	// registrations below may hold it longer, and then it is refused busy
	// itself and is started again.
	var pw *io.PipeWriter
	slow := make(chan int, 1)
	trickle := func() {
		var pr *io.PipeReader
		pr, pw = io.Pipe()
		// Closed on any exit: the server's cleanup waits for this request.
		t.Cleanup(func() { pw.Close() })
		req, err := http.NewRequest("POST", h.srv.URL+"/v1/services/web/endpoints", pr)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+writeTok)
		go func() {
			resp, err := h.srv.Client().Do(req)
			if err != nil {
				slow <- 0
				return
			}
			resp.Body.Close()
			slow <- resp.StatusCode
		}()
		if _, err := pw.Write([]byte(`{"address":`)); err != nil {
			t.Fatal(err)
		}
	}
	trickle()
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case c := <-slow:
			if c != http.StatusServiceUnavailable {
				t.Fatalf("the trickled registration ended early: %d", c)
			}
			trickle()
		default:
		}
		code, body := h.do(t, "POST", "/v1/services/web/endpoints", writeTok, []byte(`{"address":"10.0.0.3","port":80}`))
		if code == http.StatusServiceUnavailable && strings.Contains(body, "busy") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a registration past the registrations' bound: %d %s", code, body)
		}
	}
	if code, body := h.do(t, "GET", "/v1/objects", writeTok, nil); code != http.StatusOK {
		t.Fatalf("a read with the registrations' slot held: %d %s", code, body)
	}
	pw.Write([]byte(`"10.0.0.4","port":80}`))
	pw.Close()
	if c := <-slow; c != http.StatusOK {
		t.Fatalf("the trickled registration: %d", c)
	}
}
