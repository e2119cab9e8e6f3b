package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/metrics"
	"github.com/pylon-xds/pylon/internal/source"
	"github.com/pylon-xds/pylon/internal/source/kube"
)

// KubeOptions configure the Kubernetes source: off unless Kubeconfig is
// set or InCluster. Its Services and EndpointSlices join the config of
// either mode (see docs/sources.md).
type KubeOptions struct {
	// Kubeconfig is a kubeconfig file; InCluster uses the pod's service
	// account instead.
	Kubeconfig string
	InCluster  bool
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
	if k.Kubeconfig == "" && !k.InCluster {
		return nil, nil
	}
	return kube.New(kube.Options{
		Kubeconfig: k.Kubeconfig, InCluster: k.InCluster, Namespaces: k.Namespaces, Selector: k.Selector,
		Quiet: o.DebounceQuiet, MaxWait: o.DebounceMax, Logger: log, OnEvent: met.SourceEvent, OnRead: met.Reload,
	})
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
