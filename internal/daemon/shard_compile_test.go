package daemon_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/daemon"
	"github.com/pylon-xds/pylon/internal/daemon/daemontest"
	"github.com/pylon-xds/pylon/internal/fleet"
)

// shardDoc is two node groups, each scoped to its own listener and what
// it names; group b's service is written with port.
func shardDoc(port int) string {
	doc := map[string]any{
		"groups": []any{
			map[string]any{"name": "a", "match": map[string]any{"id": "a-*"}, "scope": map[string]any{"listeners": []string{"la"}}},
			map[string]any{"name": "b", "match": map[string]any{"id": "b-*"}, "scope": map[string]any{"listeners": []string{"lb"}}},
		},
		"services": []any{
			map[string]any{"name": "a1", "endpoints": []any{map[string]any{"address": "10.0.0.1", "port": 80}}},
			map[string]any{"name": "b1", "endpoints": []any{map[string]any{"address": "10.0.1.1", "port": port}}},
		},
		"routes": []any{
			map[string]any{"name": "ra", "virtual_hosts": []any{map[string]any{"name": "a", "domains": []string{"*"}, "routes": []any{map[string]any{"to": []any{map[string]any{"service": "a1"}}}}}}},
			map[string]any{"name": "rb", "virtual_hosts": []any{map[string]any{"name": "b", "domains": []string{"*"}, "routes": []any{map[string]any{"to": []any{map[string]any{"service": "b1"}}}}}}},
		},
		"listeners": []any{
			map[string]any{"name": "la", "port": 8080, "routes": "ra"},
			map[string]any{"name": "lb", "port": 8081, "routes": "rb"},
		},
	}
	b, _ := json.Marshal(doc)
	return string(b)
}

// applyShard posts doc to /v1/apply and returns the status and body.
func applyShard(t *testing.T, d *daemontest.Daemon, doc string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+d.Admin+"/v1/apply", strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+d.Token(t, "admin-token"))
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(body)
}

// A shard compiles only its groups' share of the config, but a write
// through its admin API is checked whole: a mistake in a group it does
// not serve is refused there as on any replica, not stored for the
// shards serving that group to refuse.
func TestShardChecksEveryGroupOfAWrite(t *testing.T) {
	d := daemontest.Start(t, daemon.Options{Replicas: daemon.ReplicaOptions{Groups: fleet.Selector{"a"}}})
	if code, body := applyShard(t, d, shardDoc(80)); code != http.StatusOK {
		t.Fatalf("a good config: %d %s", code, body)
	}
	code, body := applyShard(t, d, shardDoc(0))
	if code == http.StatusOK || !strings.Contains(body, `b1`) || !strings.Contains(body, `endpoints[0].port`) {
		t.Errorf("a config whose group b (served elsewhere) has a bad port: %d %s\nwant it refused naming b1's endpoints[0].port", code, body)
	}
}
