package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/metrics"
	"github.com/pylon-xds/pylon/internal/source"
	"github.com/pylon-xds/pylon/internal/source/kube"
	"github.com/pylon-xds/pylon/internal/xdstype"
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
	// DenyCIDRs are endpoint addresses never served (nil: the cloud
	// metadata services', kube.DefaultDenyCIDRs); AllowCIDRs, if any, the
	// only ones served.
	DenyCIDRs, AllowCIDRs []string
	// ForeignSlices serves EndpointSlices not made by Kubernetes'
	// EndpointSlice controller.
	ForeignSlices bool
	// NodeLocalities reads the Nodes' topology labels as their endpoints'
	// locality (it needs get, list and watch on nodes).
	NodeLocalities bool
}

// DefaultKubeDenyCIDRs is --kube-deny-cidrs' default: the cloud metadata
// services' addresses.
func DefaultKubeDenyCIDRs() []string { return kube.DefaultDenyCIDRs() }

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
	kube.LogThrough(log)
	return kube.New(kube.Options{
		Kubeconfig: k.Kubeconfig, InCluster: k.InCluster, Named: named, Separate: separate,
		Namespaces: k.Namespaces, Selector: k.Selector,
		DenyCIDRs: k.DenyCIDRs, AllowCIDRs: k.AllowCIDRs, ForeignSlices: k.ForeignSlices,
		NodeLocalities: k.NodeLocalities,
		Quiet:          o.DebounceQuiet, Spacing: o.spacing, Logger: log, OnEvent: met.SourceEvent, OnRead: met.Reload,
		OnCluster: func(st source.ClusterStatus) {
			met.KubeCluster(st.Name, st.Connected, st.LastContact)
			met.KubeClusterDegraded(st.Name, st.Degraded)
		},
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
	var m kubeMerger
	m.reserve(src, initial.Files)
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
	g.Go(func() error { return (&kubeMerger{src: src}).run(ctx, updates, own, cluster) })
	return own
}

// kubeMerger joins the config's own updates and the cluster's, as
// source.Merge does, where the own files win a name or an endpoint both
// hold: what the own files hold is reserved in the source, which leaves
// it out of the cluster's files, so that a cluster's writer never
// overrides the files nor blocks their changes.
type kubeMerger struct {
	src   *kube.Source
	cache config.Cache
	// own is what the own files held last.
	own kube.Own
	// dirty: own changed since the cluster's last update, which may have
	// been rendered with the former.
	dirty bool
}

// rendered is u with the cluster's files as the source renders them now.
func (m *kubeMerger) rendered(u source.Update) *source.Update {
	u.Files = m.src.Files()
	return &u
}

// reserve reserves what the own files hold in src (ownOf), and says
// whether it changed. Files that do not load keep the former: the
// pipeline refuses them anyway.
func (m *kubeMerger) reserve(src *kube.Source, files []config.File) bool {
	doc, err := m.cache.Load(xdstype.New(), files)
	if err != nil {
		return false
	}
	own := ownOf(doc)
	if maps.Equal(own.Names, m.own.Names) && maps.Equal(own.Endpoints, m.own.Endpoints) {
		return false
	}
	m.own, m.dirty = own, true
	src.Reserve(own)
	return true
}

// ownOf is what the own files of doc hold that a cluster's objects would
// clash with: the names of their services and of their raw Clusters and
// ClusterLoadAssignments (a model service becomes both, of its name), and
// the endpoints of their top-level list that join a service they do not
// define (the store's registrations join its own services only).
func ownOf(doc *config.Document) kube.Own {
	own := kube.Own{Names: make(map[string]string, len(doc.Services)), Endpoints: map[kube.Endpoint]bool{}}
	for _, s := range doc.Services {
		own.Names[s.Name] = "service"
	}
	for _, r := range doc.Resources {
		kind := ""
		switch r.Type.URL {
		case xdstype.ClusterURL:
			kind = "Cluster"
		case xdstype.EndpointURL:
			kind = "ClusterLoadAssignment"
		}
		if kind != "" && own.Names[r.Name] == "" {
			own.Names[r.Name] = kind
		}
	}
	for _, e := range doc.Endpoints {
		if own.Names[e.Service] == "" {
			own.Endpoints[kube.Endpoint{Service: e.Service, Address: e.Address, Port: e.Port}] = true
		}
	}
	return own
}

// run sends each update of own or cluster on, with the latest of the
// other (own's files first), once both have sent; it returns when ctx
// ends or an input closes.
func (m *kubeMerger) run(ctx context.Context, out chan<- source.Update, own, cluster <-chan source.Update) error {
	var o, c *source.Update
	for {
		var at time.Time
		select {
		case <-ctx.Done():
			return nil
		case u, ok := <-own:
			if !ok {
				return nil
			}
			o, at = &u, u.AcceptedAt
			if m.reserve(m.src, u.Files) && c != nil {
				c = m.rendered(*c)
			}
		case u, ok := <-cluster:
			if !ok {
				return nil
			}
			c, at = &u, u.AcceptedAt
			if m.dirty {
				// Perhaps rendered before the names changed: once more.
				c, m.dirty = m.rendered(u), false
			}
		}
		if o == nil || c == nil {
			continue
		}
		merged := source.Update{Files: append(append([]config.File(nil), o.Files...), c.Files...), Err: o.Err, Revision: o.Revision, AcceptedAt: at}
		if merged.Err == nil {
			merged.Err = c.Err
		}
		select {
		case out <- merged:
		case <-ctx.Done():
			return nil
		}
	}
}
