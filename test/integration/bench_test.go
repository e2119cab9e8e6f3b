package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
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
