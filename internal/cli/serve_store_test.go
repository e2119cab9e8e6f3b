package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/daemon"
	"github.com/pylon-xds/pylon/internal/store/etcd/etcdtest"
)

// Store flags that cannot work stop serve before it opens anything.
func TestServeStoreFlagErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--store", "etcd"}, "--store etcd needs --etcd-endpoints"},
		{[]string{"--store", "zookeeper"}, `--store "zookeeper": must be bolt or etcd`},
		{[]string{"--store", "etcd", "--etcd-endpoints", "127.0.0.1:1", "--etcd-cert", "/x/etcd.crt"}, "--etcd-cert and --etcd-key go together"},
		{[]string{"--etcd-prefix", "/other"}, "only used with --store etcd"},
		{[]string{"--etcd-endpoints", "127.0.0.1:1"}, "only used with --store etcd"},
		{[]string{"--etcd-timeout", "2s"}, "only used with --store etcd"},
		{[]string{"--store", "etcd", "--etcd-endpoints", "127.0.0.1:1", "--etcd-probe", "-1s"}, "--etcd-probe: between 0"},
		{[]string{"--store", "etcd", "--etcd-endpoints", "127.0.0.1:1", "--etcd-timeout", "2h"}, "--etcd-timeout and --etcd-probe: between 0"},
	} {
		args := append([]string{"serve", "--xds-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--data-dir", t.TempDir()}, c.args...)
		if code, _, stderr := run(args...); code != 1 || !strings.Contains(stderr, c.want) {
			t.Errorf("serve %v: exit %d, %q; want an error mentioning %q", c.args, code, stderr, c.want)
		}
	}
}

// serve --store etcd serves the config kept in etcd under the prefix
// given, and `pylon status` heads with DEGRADED and the cause while etcd
// is away, and without it once etcd is back.
func TestServeOnEtcdStatusDegraded(t *testing.T) {
	srv := etcdtest.Start(t)
	d := startServe(t, "--store", "etcd", "--etcd-endpoints", srv.Endpoint(), "--etcd-prefix", "/cli-test")
	out := d.must(t, "status")
	if strings.Contains(out, "DEGRADED") {
		t.Fatalf("status with etcd up:\n%s", out)
	}
	if out := d.must(t, "get", "listeners"); !strings.Contains(out, "http") {
		t.Fatalf("the seeded quickstart is not served from etcd:\n%s", out)
	}
	srv.Stop()
	waitStatus(t, d, func(out string) bool {
		return strings.HasPrefix(out, "DEGRADED: store unreachable since ") && strings.Contains(out, srv.Endpoint()) && strings.Contains(out, "writes are refused")
	})
	srv.Restart()
	waitStatus(t, d, func(out string) bool { return !strings.Contains(out, "DEGRADED") })
}

// waitStatus runs `pylon status` until its output satisfies ok, for at
// most 30s.
func waitStatus(t *testing.T, d *testPylon, ok func(string) bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var out string
	for attempt := 0; attempt < 1000; attempt++ {
		out = d.must(t, "status")
		if ok(out) {
			return
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("status never as expected; last:\n%s", out)
}

// --drain-period defaults to 30s where other replicas can take the proxies
// over (etcd, file mode) and to none with the embedded store, unless given.
func TestDrainPeriodDefault(t *testing.T) {
	for _, c := range []struct {
		name   string
		o      daemon.Options
		set    bool
		period time.Duration
		want   time.Duration
	}{
		{"bolt", daemon.Options{Store: daemon.StoreBolt}, false, defaultDrainPeriod, 0},
		{"bolt, set", daemon.Options{Store: daemon.StoreBolt}, true, 5 * time.Second, 5 * time.Second},
		{"etcd", daemon.Options{Store: daemon.StoreEtcd}, false, defaultDrainPeriod, defaultDrainPeriod},
		{"file mode", daemon.Options{Store: daemon.StoreBolt, ConfigPath: "pylon.yaml"}, false, defaultDrainPeriod, defaultDrainPeriod},
	} {
		o := c.o
		o.DrainPeriod = c.period
		drainDefault(&o, c.set)
		if o.DrainPeriod != c.want {
			t.Errorf("%s: drain period %v, want %v", c.name, o.DrainPeriod, c.want)
		}
	}
}

// --max-connection-age defaults to 30 minutes, and 0
// is never, which the daemon takes as a negative age (its zero is its
// default).
func TestMaxConnectionAgeFlag(t *testing.T) {
	cmd := newServe(&globals{}, &adminFlags{})
	if def := cmd.Flags().Lookup("max-connection-age").DefValue; def != "30m0s" {
		t.Errorf("--max-connection-age defaults to %s, want 30m0s", def)
	}
	for _, c := range []struct{ flag, want time.Duration }{{0, -1}, {30 * time.Minute, 30 * time.Minute}, {time.Hour, time.Hour}} {
		o := daemon.Options{MaxConnectionAge: c.flag}
		connectionAge(&o)
		if o.MaxConnectionAge != c.want {
			t.Errorf("--max-connection-age %v: the daemon gets %v, want %v", c.flag, o.MaxConnectionAge, c.want)
		}
	}
}
