package main

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"google.golang.org/protobuf/proto"

	"github.com/pylon-xds/pylon/internal/configstore"
	"github.com/pylon-xds/pylon/internal/daemon"
	"github.com/pylon-xds/pylon/internal/store/bolt"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// serveDaemon runs the whole Pylon daemon, as `pylon serve` does, for the
// churn scenario: "pylon-api" keeps the world in the embedded store under
// dir/data (seeded here) and takes the changes as endpoint registrations
// through the admin API; "pylon-file" reads dir/config.json, which the
// driver rewrites (written aside, renamed into place). It prints the xDS
// and admin addresses and a pprof address on one line, then serves until
// killed.
func serveDaemon(impl string, clusters int, dir string) error {
	// pprof of the daemon on its own address: the admin API's needs the
	// read token.
	prof, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	// The driver's POST /gc (collect) is served there too.
	http.HandleFunc("POST /gc", collect)
	go func() { _ = http.Serve(prof, nil) }()
	o := daemon.Options{
		XDSAddr: "127.0.0.1:0", AdminAddr: "127.0.0.1:0", DataDir: filepath.Join(dir, "data"),
		Identifier: "pylon-bench", Resync: -1,
		// The simulator multiplexes hundreds of proxies on one
		// connection: lift the per-connection stream bound.
		MaxStreamsPerConnection: 1 << 20,
		Logger:                  slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		OnReady:                 func(x, a string) { fmt.Printf("%s %s %s\n", x, a, prof.Addr()) },
	}
	switch impl {
	case "pylon-file":
		// The benchmark writes its file whole in one write: it may take
		// the settle (serve --debounce-settle 10ms) rather than the quiet.
		o.ConfigPath = filepath.Join(dir, "config.json")
		o.DebounceSettle = 10 * time.Millisecond
	case "pylon-kube":
		o.ConfigPath = filepath.Join(dir, "config.json")
		o.Kube = daemon.KubeOptions{Kubeconfig: filepath.Join(dir, "kubeconfig"), Namespaces: []string{kubeNS}}
	case "pylon-api":
		if err := seedStore(o.DataDir, clusters); err != nil {
			return err
		}
	}
	return daemon.Run(context.Background(), o)
}

// seedStore stores the world (without registrations) in a new embedded
// store, as `pylon apply` of the same document would.
func seedStore(dataDir string, clusters int) error {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return err
	}
	st, err := bolt.Open(dataDir)
	if err != nil {
		return err
	}
	defer st.Close()
	doc, err := churnDoc(clusters, nil)
	if err != nil {
		return err
	}
	reg := xdstype.New()
	changes, err := configstore.Objects(reg, doc)
	if err != nil {
		return err
	}
	svc := configstore.New(configstore.Options{Store: st, Registry: reg})
	_, err = svc.Commit(context.Background(), changes, "churn world", false)
	return err
}

// serveGCPChurn runs go-control-plane for the churn scenario: the driver
// posts how many changes of the schedule are due (POST /churn?upto=K);
// they are applied to the world and, at most every 100ms (Pylon's
// default least spacing between updates), set as one snapshot, as an
// integrator batching its changes would.
func serveGCPChurn(clusters int) error {
	// ads=false: in ADS mode go-control-plane's cache answers an EDS
	// request only when it names every assignment of the snapshot, and
	// the churn proxies name a few services each (a sidecar's view);
	// outside ADS mode it answers the names asked, over the same ADS
	// stream.
	c := cache.NewSnapshotCache(false, fleetHash{}, nil)
	g := newGCPServer(context.Background(), c, nil)
	srv := &gcp{cache: c, prev: map[types.ResponseType]string{}}
	base := makeWorld(clusters, 0, 0)
	if err := srv.set(base); err != nil {
		return err
	}
	var (
		mu    sync.Mutex
		st    = newChurnState(clusters)
		dirty bool
	)
	http.HandleFunc("POST /churn", func(w http.ResponseWriter, r *http.Request) {
		k, _ := strconv.Atoi(r.URL.Query().Get("upto"))
		mu.Lock()
		dirty = len(st.advance(k)) > 0 || dirty
		mu.Unlock()
	})
	go func() {
		for range time.Tick(100 * time.Millisecond) {
			mu.Lock()
			if !dirty {
				mu.Unlock()
				continue
			}
			w := churnWorld(base, st)
			dirty = false
			mu.Unlock()
			if err := srv.set(w); err != nil {
				fmt.Fprintln(os.Stderr, "gcp set:", err)
			}
		}
	}()
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	ctl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go func() { _ = http.Serve(ctl, nil) }()
	fmt.Printf("%s %s\n", raw.Addr(), ctl.Addr())
	return g.Serve(raw)
}

// churnWorld is base with st's registered endpoints added to their
// services' assignments (new messages; base is not changed).
func churnWorld(base world, st *churnState) world {
	w := base
	w.endpoints = make([]proto.Message, len(base.endpoints))
	for i, m := range base.endpoints {
		if len(st.regs[i]) == 0 {
			w.endpoints[i] = m
			continue
		}
		cla := proto.Clone(m).(*endpointv3.ClusterLoadAssignment)
		loc := cla.Endpoints[0]
		// In order: the same registrations make the same assignment.
		for _, r := range slices.Sorted(maps.Keys(st.regs[i])) {
			loc.LbEndpoints = append(loc.LbEndpoints, &endpointv3.LbEndpoint{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
				Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
					Address: seqAddr(r), PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 8080},
				}}},
			}}})
		}
		w.endpoints[i] = cla
	}
	return w
}
