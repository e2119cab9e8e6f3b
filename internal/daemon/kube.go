package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/metrics"
	"github.com/pylon-xds/pylon/internal/source"
	"github.com/pylon-xds/pylon/internal/source/kube"
)

// KubeOptions configure the Kubernetes source: off unless Kubeconfig is
// set, InCluster, or Clusters are given. Its Services and EndpointSlices
// join the config of either mode (see docs/sources.md).
type KubeOptions struct {
	// Kubeconfig is a kubeconfig file; InCluster uses the pod's service
	// account instead. Either is the unnamed cluster.
	Kubeconfig string
	InCluster  bool
	// Clusters are named clusters, each NAME=KUBECONFIG
	// (--kube-cluster).
	Clusters []string
	// Merge is how a service several clusters define is served:
	// "locality" (default: one service, each named cluster's endpoints in
	// its own region) or "separate" (named clusters' services are
	// NAME/NAMESPACE/NAME:PORT).
	Merge string
	// Namespaces limits the watch (default: all); Selector is a label
	// selector for Services and EndpointSlices.
	Namespaces []string
	Selector   string
}

// kubeSyncTimeout bounds the first listing of the cluster at start.
const kubeSyncTimeout = 30 * time.Second

// newKube is the Kubernetes source o configures, nil when off.
func newKube(o Options, met *metrics.Metrics, log *slog.Logger) (*kube.Source, error) {
	k := o.Kube
	if k.Kubeconfig == "" && !k.InCluster && len(k.Clusters) == 0 {
		return nil, nil
	}
	named, err := kubeClusters(k.Clusters)
	if err != nil {
		return nil, err
	}
	var separate bool
	switch k.Merge {
	case "", "locality":
	case "separate":
		separate = true
	default:
		return nil, fmt.Errorf("--kube-merge %q: give locality or separate", k.Merge)
	}
	return kube.New(kube.Options{
		Kubeconfig: k.Kubeconfig, InCluster: k.InCluster, Named: named, Separate: separate,
		Namespaces: k.Namespaces, Selector: k.Selector,
		Quiet: o.DebounceQuiet, MaxWait: o.DebounceMax, Logger: log, OnEvent: met.SourceEvent, OnRead: met.Reload,
		OnCluster: func(st source.ClusterStatus) { met.KubeCluster(st.Name, st.Connected, st.LastContact) },
	})
}

// kubeClusters parses --kube-cluster NAME=KUBECONFIG values.
func kubeClusters(values []string) ([]kube.Named, error) {
	var out []kube.Named
	for _, v := range values {
		name, file, ok := strings.Cut(v, "=")
		if !ok || file == "" {
			return nil, fmt.Errorf("--kube-cluster %q: give NAME=KUBECONFIG", v)
		}
		if err := kube.CheckName(name); err != nil {
			return nil, err
		}
		out = append(out, kube.Named{Name: name, Kubeconfig: file})
	}
	return out, nil
}

// kubeStatus is the admin API's Sources: the clusters' states (nil
// without the source).
func kubeStatus(src *kube.Source) func() source.Status {
	if src == nil {
		return nil
	}
	return src.Status
}

// kubeInitial adds the cluster's files to the first config, listed once
// within kubeSyncTimeout: a config naming its services is good from the
// start, and an unreachable or forbidden API server is a clear startup
// error.
func kubeInitial(ctx context.Context, src *kube.Source, initial *source.Update) {
	if src == nil || initial.Err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, kubeSyncTimeout)
	defer cancel()
	files, err := src.Sync(ctx)
	if err != nil {
		initial.Err = fmt.Errorf("%w (within %v)", err, kubeSyncTimeout)
		return
	}
	initial.Files = append(append([]config.File(nil), initial.Files...), files...)
}

// kubeFiles is the store's Extra: the cluster's files as the source sees
// them now, so that a write may name its services (nil without one).
func kubeFiles(src *kube.Source) func() []config.File {
	if src == nil {
		return nil
	}
	return src.Files
}

// withKube is where the config's own source sends: updates itself, or,
// with the Kubernetes source, a channel merged with the cluster's files
// into updates.
func withKube(ctx context.Context, g *errgroup.Group, src *kube.Source, updates chan<- source.Update) chan<- source.Update {
	if src == nil {
		return updates
	}
	own, cluster := make(chan source.Update), make(chan source.Update)
	g.Go(func() error { return src.Run(ctx, cluster) })
	g.Go(func() error { return source.Merge(ctx, updates, own, cluster) })
	return own
}
