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
// 1, 100 and 1,000 registrants at once, on the daemon's defaults (128
// admin connections at once; more wait to be accepted). Concurrent writes
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
	p, _ := storePylon(b, b.TempDir())
	if code, res := p.api(b, "POST", "/v1/apply", "services:\n- { name: svc, endpoints: [{ address: 127.0.0.1, port: 9000 }] }\n"); code != http.StatusOK {
		b.Fatalf("apply: %d %v", code, res)
	}
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: registrants, MaxConnsPerHost: registrants}}
	defer client.CloseIdleConnections()
	register := func(r, i int) error {
		if renew {
			i = 0
		}
		body := fmt.Sprintf(`{"address":"10.%d.%d.%d","port":%d,"ttl":"1h"}`, r/250, r%250, i%250, 1+i/250%60000)
		req, _ := http.NewRequest("POST", "http://"+p.adminAddr+"/v1/services/svc/endpoints", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+p.token)
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
			return fmt.Errorf("register: %d %s", resp.StatusCode, msg)
		}
		return nil
	}
	if renew {
		for r := range registrants {
			if err := register(r, 0); err != nil {
				b.Fatal(err)
			}
		}
	}
	var next atomic.Int64
	var wg sync.WaitGroup
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
