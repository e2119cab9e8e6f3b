package integration

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/daemon"
)

// BenchmarkEndpointRegistrations measures endpoint registrations through
// the admin API (each validated like a config file and fsynced before it is
// acknowledged) and how many publishes the debouncing turns them into.
func BenchmarkEndpointRegistrations(b *testing.B) {
	p, _ := storePylon(b, b.TempDir())
	if code, res := p.api(b, "POST", "/v1/apply", "services:\n- { name: svc, endpoints: [{ address: 127.0.0.1, port: 9000 }] }\n"); code != http.StatusOK {
		b.Fatalf("apply: %d %v", code, res)
	}
	publishes := func() float64 {
		parser := scrapeText(b, p)
		return parser
	}
	before := publishes()
	i := 0
	for b.Loop() {
		i++
		req, _ := json.Marshal(map[string]any{"address": fmt.Sprintf("10.%d.%d.%d", i/65536, i/256%256, i%256), "port": 80})
		if code, ok := postOnce(p, "/v1/services/svc/endpoints", string(req)); !ok || code != http.StatusOK {
			b.Fatalf("register: %d", code)
		}
	}
	b.ReportMetric(float64(i)/b.Elapsed().Seconds(), "registrations/s")
	b.ReportMetric(publishes()-before, "publishes")
}

func scrapeText(b *testing.B, p *pylon) float64 {
	b.Helper()
	return counter(scrapeTB(b, p), "pylon_config_publishes_total", "result", "published")
}

// BenchmarkConcurrentRegistrations measures registrations (new) and lease
// renewals (renew: each registrant re-registers its one endpoint with its
// TTL, as an instance does every few seconds) through the admin API with
// 1, 100 and 1,000 registrants at once. Each registrant is a client of its
// own (an instance, a sidecar) keeping one connection alive, dialed before
// the timer starts. The daemon runs on its defaults: 2,048 connections
// served at once (--admin-max-conns; 128 left most of 1,000 registrants
// waiting to be accepted until a kept-alive connection idled out), and
// its 100 ms debounce, which the other tests shorten to 20 ms (100 ms let
// 22-30% more registrations through: more of them share a publish). Every
// registration is still fsynced before it is answered. Concurrent writes
// share store commits (configstore's group commit, bolt's grouped
// renewals), so the rate is bounded by the disk's fsyncs per group rather
// than per call.
func BenchmarkConcurrentRegistrations(b *testing.B) {
	for _, mode := range []string{"new", "renew"} {
		for _, n := range []int{1, 100, 1000} {
			b.Run(fmt.Sprintf("%s/registrants=%d", mode, n), func(b *testing.B) { benchRegistrants(b, n, mode == "renew") })
		}
	}
}

func benchRegistrants(b *testing.B, registrants int, renew bool) {
	dir := b.TempDir()
	p, _ := runPylon(b, daemon.Options{DataDir: dir, DebounceQuiet: daemonDebounce, DebounceMax: daemonDebounceMax})
	p.token = readToken(b, dir)
	if code, res := p.api(b, "POST", "/v1/apply", "services:\n- { name: svc, endpoints: [{ address: 127.0.0.1, port: 9000 }] }\n"); code != http.StatusOK {
		b.Fatalf("apply: %d %v", code, res)
	}
	// Each registrant holds one connection and speaks HTTP/1.1 on it
	// with the standard library's request writer and response reader,
	// without a Transport's two goroutines a connection and their
	// handoffs: the registrants share the server's two cores, and a real
	// one runs elsewhere.
	conns := make([]*registrantConn, registrants)
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.conn.Close()
			}
		}
	}()
	// call sends one request and reads the whole answer on r's
	// connection, dialed at its first call.
	call := func(r int, method, path, body string) error {
		if conns[r] == nil {
			c, err := net.Dial("tcp", p.adminAddr)
			if err != nil {
				return err
			}
			conns[r] = &registrantConn{conn: c, r: bufio.NewReader(c), w: bufio.NewWriter(c)}
		}
		return conns[r].do(method, "http://"+p.adminAddr+path, p.token, body)
	}
	register := func(r, i int) error {
		if renew {
			i = 0
		}
		body := fmt.Sprintf(`{"address":"10.%d.%d.%d","port":%d,"ttl":"1h"}`, r/250, r%250, i%250, 1+i/250%60000)
		return call(r, "POST", "/v1/services/svc/endpoints", body)
	}
	// Each registrant's connection is dialed before the timer starts; a
	// renewing one registers its endpoint on it.
	var wg sync.WaitGroup
	for r := range registrants {
		wg.Go(func() {
			err := call(r, "GET", "/healthz", "")
			if err == nil && renew {
				err = register(r, 0)
			}
			if err != nil {
				b.Error(err)
			}
		})
	}
	wg.Wait()
	if b.Failed() {
		return
	}
	var next atomic.Int64
	b.ResetTimer()
	for r := range registrants {
		wg.Go(func() {
			for i := 0; next.Add(1) <= int64(b.N); i++ {
				if err := register(r, i); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "regs/s")
}

// registrantConn is one registrant's kept-alive connection.
type registrantConn struct {
	conn net.Conn
	r    *bufio.Reader
	w    *bufio.Writer
}

// do sends one request and reads its whole answer; a status other than
// 200 is an error.
func (c *registrantConn) do(method, url, token, body string) error {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	_ = c.conn.SetDeadline(time.Now().Add(30 * time.Second))
	if err := req.Write(c.w); err != nil {
		return err
	}
	if err := c.w.Flush(); err != nil {
		return err
	}
	resp, err := http.ReadResponse(c.r, req)
	if err != nil {
		return err
	}
	msg, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err == nil && resp.Close {
		err = fmt.Errorf("%s %s: the server closed the connection", method, url)
	}
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s %s: %d %.1024s", method, url, resp.StatusCode, msg)
	}
	return err
}

// The daemon's default debounce (daemon.Options), which the other tests
// shorten: registrations arriving within it share a publish.
const (
	daemonDebounce    = 100 * time.Millisecond
	daemonDebounceMax = time.Second
)
