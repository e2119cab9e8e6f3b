package integration

import (
	"encoding/json"
	"fmt"
	"io"
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
// the timer starts; the daemon serves as many connections at once as there
// are registrants (--admin-max-conns; its default, 128, would leave the
// rest waiting to be accepted until a kept-alive connection idles out).
// Every registration is still fsynced before it is answered. Concurrent
// writes share store commits (configstore's group commit, bolt's grouped
// renewals), so the rate is bounded by the disk's fsyncs per group rather
// than per call.
func BenchmarkConcurrentRegistrations(b *testing.B) {
	for _, mode := range []string{"new", "renew"} {
		for _, n := range []int{1, 100, 1000} {
			b.Run(fmt.Sprintf("%s/registrants=%d", mode, n), func(b *testing.B) { benchRegistrants(b, n, mode == "renew") })
		}
	}
}

// defaultAdminConns is the daemon's default bound on admin connections,
// kept as headroom for the benchmark's other calls (apply, scrapes).
const defaultAdminConns = 128

func benchRegistrants(b *testing.B, registrants int, renew bool) {
	dir := b.TempDir()
	p, _ := runPylon(b, daemon.Options{DataDir: dir, AdminLimits: daemon.AdminLimits{MaxConns: registrants + defaultAdminConns}})
	p.token = readToken(b, dir)
	if code, res := p.api(b, "POST", "/v1/apply", "services:\n- { name: svc, endpoints: [{ address: 127.0.0.1, port: 9000 }] }\n"); code != http.StatusOK {
		b.Fatalf("apply: %d %v", code, res)
	}
	clients := make([]*http.Client, registrants)
	for r := range clients {
		clients[r] = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 1, MaxConnsPerHost: 1}}
		defer clients[r].CloseIdleConnections()
	}
	// call sends one request and reads the whole answer, so that the
	// connection is kept for the next.
	call := func(r int, method, path, body string) error {
		req, _ := http.NewRequest(method, "http://"+p.adminAddr+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+p.token)
		resp, err := clients[r].Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		msg, err := io.ReadAll(resp.Body)
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("%s %s: %d %.1024s", method, path, resp.StatusCode, msg)
		}
		return err
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
