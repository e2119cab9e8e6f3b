// Command scale runs issue 33's must-shows for replicas at full scale:
// real `pylon serve --store etcd` processes on an embedded etcd (its data
// in a temp folder), and a lean simulated fleet of ADS clients over real
// gRPC on loopback that reconnect, as clients behind a round-robin load
// balancer do, to the next replica whenever a stream ends.
//
//	go run ./bench/scale -scenario balance   # 3 replicas, 3,000 proxies
//	go run ./bench/scale -scenario shard     # 2 shards of 2 replicas, 200 groups
//
// Each prints a timeline or a table and its pass criteria, each checked;
// it exits 1 when one fails, 2 when the run could not be made.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// config is one run's sizes and bounds.
type config struct {
	scenario     string
	proxies      int
	perConn      int
	ramp         int // proxies arriving a second
	services     int // balance: services in the config; shard: per group
	endpoints    int
	groups       int
	within       time.Duration
	connectBound time.Duration
	pylon        string   // a built pylon binary; "" builds ./cmd/pylon
	flags        []string // extra `pylon serve` flags for every replica
}

func main() {
	var c config
	var flags string
	var timeout time.Duration
	flag.StringVar(&c.scenario, "scenario", "", "balance or shard")
	flag.IntVar(&c.proxies, "proxies", 0, "simulated proxies (0: 3,000 for balance, 1,000 for shard)")
	flag.IntVar(&c.perConn, "per-conn", 0, "proxies sharing one connection (0: 1 for balance, as Envoy has one; 10 for shard)")
	flag.IntVar(&c.ramp, "ramp", 0, "proxies arriving a second when the fleet connects (0: 1,000)")
	flag.IntVar(&c.services, "services", 0, "balance: services in the config (0: 4); shard: services per group (0: 20)")
	flag.IntVar(&c.endpoints, "endpoints", 0, "endpoints per service (0: 10)")
	flag.IntVar(&c.groups, "groups", 200, "shard: node groups, half per shard (even)")
	flag.DurationVar(&c.within, "within", 60*time.Second, "balance: how soon every replica must hold its share")
	flag.DurationVar(&c.connectBound, "connect-bound", 3*time.Minute, "how long the fleet may take to be configured")
	flag.StringVar(&c.pylon, "pylon", "", "a built pylon binary (default: go build ./cmd/pylon into the run's temp folder)")
	var shedRate int
	var period time.Duration
	flag.IntVar(&shedRate, "shed-rate", 0, "every replica's --shed-rate (0: pylon's default)")
	flag.DurationVar(&period, "fleet-status-period", 0, "every replica's --fleet-status-period (0: pylon's default)")
	flag.StringVar(&flags, "serve-flags", "", "more flags for every `pylon serve`, space separated")
	flag.DurationVar(&timeout, "timeout", 15*time.Minute, "bound of the whole run")
	flag.Parse()
	if shedRate > 0 {
		c.flags = append(c.flags, "--shed-rate", fmt.Sprint(shedRate))
	}
	if period > 0 {
		c.flags = append(c.flags, "--fleet-status-period", period.String())
	}
	c.flags = append(c.flags, strings.Fields(flags)...)
	if err := c.defaults(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ok, err := run(ctx, c, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "scale:", err)
		os.Exit(2)
	}
	if !ok {
		os.Exit(1)
	}
}

// defaults fills the scenario's sizes and checks them.
func (c *config) defaults() error {
	def := func(v *int, balance, shard int) {
		if *v == 0 {
			*v = balance
			if c.scenario == "shard" {
				*v = shard
			}
		}
	}
	def(&c.proxies, 3000, 1000)
	def(&c.ramp, 1000, 1000)
	def(&c.perConn, 1, 10)
	def(&c.services, 4, 20)
	def(&c.endpoints, 10, 10)
	switch {
	case c.scenario != "balance" && c.scenario != "shard":
		return fmt.Errorf("-scenario must be balance or shard, not %q", c.scenario)
	case c.proxies < 3 || c.proxies > 100000:
		return fmt.Errorf("-proxies %d: want 3 to 100,000", c.proxies)
	case c.ramp < 1 || c.ramp > 100000:
		return fmt.Errorf("-ramp %d: want 1 to 100,000 a second", c.ramp)
	case c.perConn < 1 || c.perConn > 100:
		return fmt.Errorf("-per-conn %d: want 1 to 100 (a replica's streams per connection)", c.perConn)
	case c.services < 1 || c.services > 1000 || c.endpoints < 1 || c.endpoints > 256:
		return fmt.Errorf("-services %d -endpoints %d: want 1-1,000 and 1-256", c.services, c.endpoints)
	case c.scenario == "shard" && (c.groups < 2 || c.groups%2 != 0 || c.groups > 1000):
		return fmt.Errorf("-groups %d: want an even number, 2 to 1,000", c.groups)
	}
	return nil
}

// run runs c's scenario, printing to w; ok is whether every criterion
// passed.
func run(ctx context.Context, c config, w io.Writer) (bool, error) {
	if c.scenario == "shard" {
		return runShard(ctx, c, w)
	}
	return runBalance(ctx, c, w)
}
