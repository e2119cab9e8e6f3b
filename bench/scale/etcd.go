package main

import (
	"fmt"
	"net"
	"net/url"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// etcdReady bounds how long the embedded member may take to serve.
const etcdReady = 30 * time.Second

// startEtcd runs a one-member etcd in this process on loopback, its data in
// dir, and returns it with its client address (host:port). The benchmark
// embeds it so that one `go run` needs nothing installed; the replicas are
// the processes measured, not etcd.
func startEtcd(dir string) (*embed.Etcd, string, error) {
	ports, err := freePorts(2)
	if err != nil {
		return nil, "", err
	}
	cfg := embed.NewConfig()
	cfg.Name = "scale"
	cfg.Dir = dir
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	pu := url.URL{Scheme: "http", Host: ports[0]}
	cu := url.URL{Scheme: "http", Host: ports[1]}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{pu}, []url.URL{pu}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{cu}, []url.URL{cu}
	cfg.InitialCluster = cfg.Name + "=" + pu.String()
	cfg.InitialClusterToken = "pylon-bench-scale"
	cfg.EnableGRPCGateway = false
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, "", fmt.Errorf("starting etcd: %w", err)
	}
	select {
	case <-e.Server.ReadyNotify():
		return e, ports[1], nil
	case err := <-e.Err():
		e.Close()
		return nil, "", fmt.Errorf("etcd: %w", err)
	case <-time.After(etcdReady):
		e.Close()
		return nil, "", fmt.Errorf("etcd not ready after %v", etcdReady)
	}
}

// freePorts returns n distinct loopback ports free now, held together so
// none is handed out twice and closed just before etcd binds them (etcd
// needs its URLs before it listens).
func freePorts(n int) ([]string, error) {
	var out []string
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		out = append(out, l.Addr().String())
	}
	return out, nil
}
