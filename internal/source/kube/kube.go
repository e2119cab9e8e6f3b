// Package kube is the Kubernetes source: Services and discovery.k8s.io/v1
// EndpointSlices, read (never written) through client-go's shared
// informers, become model services named NAMESPACE/NAME:PORT with their
// endpoints. It hands the pipeline config files of its own (a file of
// services, a file of endpoints per slice, under "kubernetes/CLUSTER/"),
// which the daemon joins to the store's or the config folder's: routes and
// listeners written in Pylon name these services like any other.
package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/pager"
	"k8s.io/klog/v2"

	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/source"
)

// Options configures a Source.
type Options struct {
	// Kubeconfig is a kubeconfig file; "" with InCluster uses the pod's
	// service account. Either is the unnamed cluster, named Cluster.
	Kubeconfig string
	InCluster  bool
	// Cluster names the unnamed cluster in the files' paths, /status and
	// the metrics (default "cluster").
	Cluster string
	// Named are the clusters given by name (--kube-cluster NAME=FILE):
	// each named cluster's endpoints have its name as their locality
	// region.
	Named []Named
	// Separate keeps named clusters' services apart, named
	// NAME/NAMESPACE/NAME:PORT; otherwise a service several clusters
	// define is one service with every cluster's endpoints.
	Separate bool
	// Namespaces limits the watch to these namespaces (default: all).
	Namespaces []string
	// Selector is a label selector for Services and EndpointSlices (the
	// endpoints' controller copies a Service's labels to its slices).
	Selector string
	// Quiet is the least time between two updates (--debounce): a change
	// after a quiet spell is sent at once, and the changes of a burst are
	// folded into updates at least Quiet apart, or Spacing when set and
	// longer (source.Pacer; the daemon's grows with the proxies a publish
	// reaches).
	Quiet   time.Duration
	Spacing func() time.Duration
	// MaxEndpoints bounds the endpoints served (default 200,000) and
	// MaxServices the services (default 20,000), every cluster's
	// together: a slice or a Service past them is dropped with a warning,
	// and the rest served.
	MaxEndpoints, MaxServices int
	// DenyCIDRs are addresses never served (nil: DefaultDenyCIDRs, the
	// cloud metadata services'); AllowCIDRs, if any, the only ones served.
	DenyCIDRs, AllowCIDRs []string
	// ForeignSlices serves EndpointSlices not made by Kubernetes'
	// EndpointSlice controller (custom controllers, slices written by
	// hand); otherwise they are dropped with a warning.
	ForeignSlices bool
	// NodeLocalities reads each Node's topology labels (region and zone)
	// through a metadata-only watch, for the endpoints on it: it needs
	// get, list and watch on nodes, cluster-wide. MaxNodes bounds the
	// nodes whose labels are held (default DefaultMaxNodes).
	NodeLocalities bool
	MaxNodes       int
	// Probe is how often each cluster's API server is asked whether it is
	// ready (default 5s, each ask bounded by it too).
	Probe  time.Duration
	Logger *slog.Logger
	// OnEvent and OnRead, if set, are told of each object change and each
	// config handed over (for metrics, as the file source does).
	OnEvent, OnRead func()
	// OnCluster, if set, is told of each cluster's state after every
	// probe and sync (for metrics).
	OnCluster func(source.ClusterStatus)
}

// Named is a cluster given by name.
type Named struct{ Name, Kubeconfig string }

// DefaultMaxEndpoints and DefaultMaxServices are Options.MaxEndpoints'
// and MaxServices' defaults. 20,000 services of the longest names
// Kubernetes allows fit the 16 MiB a config file may hold.
const (
	DefaultMaxEndpoints = 200_000
	DefaultMaxServices  = 20_000
)

// DefaultDenyCIDRs are the cloud metadata services' addresses (AWS, GCP,
// Azure, OpenStack, Oracle: 169.254.169.254 and its link-local range;
// AWS's IPv6 fd00:ec2::254; Azure's wire server 168.63.129.16; Alibaba's
// 100.100.100.200): an endpoint there would send a service's traffic, and
// whatever credentials it carries, to the node's metadata service.
func DefaultDenyCIDRs() []string {
	return []string{"169.254.0.0/16", "fd00:ec2::254/128", "168.63.129.16/32", "100.100.100.200/32"}
}

// defaultProbe is Options.Probe's default.
const defaultProbe = 5 * time.Second

// Source watches one cluster or several.
type Source struct {
	opts     Options
	log      *slog.Logger
	clusters []*cluster

	// check is what a slice's endpoints must pass.
	check check

	mu sync.Mutex
	// own is what the config's own files hold (Reserve).
	own Own
	// held counts the endpoints of every cluster's slices held.
	held int
	// changed is poked, one slot, whenever an object changes.
	changed chan struct{}
	// listed: Sync has listed the objects.
	listed bool
}

// New returns a source for opts: it reads the kubeconfigs (or the pod's
// service account) and checks the names and the selector, and connects
// to nothing yet.
func New(opts Options) (*Source, error) {
	if opts.Kubeconfig != "" && opts.InCluster {
		return nil, errors.New("kubernetes: give a kubeconfig or in-cluster, not both")
	}
	if opts.Kubeconfig == "" && !opts.InCluster && len(opts.Named) == 0 {
		return nil, errors.New("kubernetes: no cluster: give a kubeconfig, in-cluster or a named cluster")
	}
	if _, err := labels.Parse(opts.Selector); err != nil {
		return nil, fmt.Errorf("--kube-selector %q: %w", opts.Selector, err)
	}
	if opts.Cluster == "" {
		opts.Cluster = "cluster"
	}
	if opts.MaxEndpoints <= 0 {
		opts.MaxEndpoints = DefaultMaxEndpoints
	}
	if opts.MaxServices <= 0 {
		opts.MaxServices = DefaultMaxServices
	}
	if opts.MaxNodes <= 0 {
		opts.MaxNodes = DefaultMaxNodes
	}
	if opts.DenyCIDRs == nil {
		opts.DenyCIDRs = DefaultDenyCIDRs()
	}
	chk, err := newCheck(opts)
	if err != nil {
		return nil, err
	}
	if opts.Probe <= 0 {
		opts.Probe = defaultProbe
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := checkNames(opts); err != nil {
		return nil, err
	}
	s := &Source{opts: opts, log: log, check: chk, changed: make(chan struct{}, 1)}
	if opts.Kubeconfig != "" || opts.InCluster {
		c, err := newCluster(opts.Cluster, opts.Kubeconfig, naming{})
		if err != nil {
			return nil, err
		}
		s.clusters = append(s.clusters, c)
	}
	for _, n := range opts.Named {
		nm := naming{region: n.Name}
		if opts.Separate {
			nm.prefix = n.Name + "/"
		}
		c, err := newCluster(n.Name, n.Kubeconfig, nm)
		if err != nil {
			return nil, fmt.Errorf("--kube-cluster %s: %w", n.Name, err)
		}
		s.clusters = append(s.clusters, c)
	}
	return s, nil
}

// newCheck parses the CIDRs of opts.
func newCheck(opts Options) (check, error) {
	c := check{foreign: opts.ForeignSlices}
	for _, l := range []struct {
		flag string
		in   []string
		out  *[]netip.Prefix
	}{{"--kube-deny-cidrs", opts.DenyCIDRs, &c.deny}, {"--kube-allow-cidrs", opts.AllowCIDRs, &c.allow}} {
		for _, v := range l.in {
			p, err := netip.ParsePrefix(strings.TrimSpace(v))
			if err != nil {
				return check{}, fmt.Errorf("%s %q: %w", l.flag, v, err)
			}
			*l.out = append(*l.out, p.Masked())
		}
	}
	return c, nil
}

// checkNames refuses a named cluster's name that is not a short DNS
// label, or is given twice, or is the unnamed cluster's.
func checkNames(opts Options) error {
	seen := map[string]bool{opts.Cluster: opts.Kubeconfig != "" || opts.InCluster}
	for _, n := range opts.Named {
		if err := CheckName(n.Name); err != nil {
			return err
		}
		if seen[n.Name] {
			return fmt.Errorf("--kube-cluster %s: the name is given twice (the --kubeconfig cluster is named %s)", n.Name, opts.Cluster)
		}
		seen[n.Name] = true
	}
	return nil
}

// prefix is where a cluster's files are named.
func (c *cluster) prefix() string { return "kubernetes/" + c.name }

// namespaces are the namespaces watched, metav1.NamespaceAll for all.
func (s *Source) namespaces() []string {
	if len(s.opts.Namespaces) == 0 {
		return []string{metav1.NamespaceAll}
	}
	return s.opts.Namespaces
}

// Sync lists every cluster's Services and EndpointSlices once and returns
// the files they make: the daemon's first config, before anything
// listens, includes them, so that a config naming them is good from the
// start. ctx bounds it; a cluster that cannot be listed is an error
// naming it.
func (s *Source) Sync(ctx context.Context) ([]config.File, error) {
	list := metav1.ListOptions{LabelSelector: s.opts.Selector, Limit: syncPage}
	for _, c := range s.clusters {
		if s.opts.NodeLocalities {
			if err := s.syncNodes(ctx, c); err != nil {
				return nil, fmt.Errorf("kubernetes: cluster %s: listing nodes (--kube-node-localities): %w", c.name, err)
			}
		}
		for _, ns := range s.namespaces() {
			services := pager.New(func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return c.cs.CoreV1().Services(ns).List(ctx, o)
			})
			err := services.EachListItem(ctx, list, func(obj runtime.Object) error {
				s.setServiceObj(c, obj)
				return nil
			})
			if err != nil {
				return nil, fmt.Errorf("kubernetes: cluster %s: listing services: %w", c.name, err)
			}
			slices := pager.New(func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return c.cs.DiscoveryV1().EndpointSlices(ns).List(ctx, o)
			})
			err = slices.EachListItem(ctx, list, func(obj runtime.Object) error {
				// Trimmed as the informer's are: with node localities the
				// slice is kept (keepObj), not only rendered.
				slim, _ := s.transform(obj)
				s.setSliceObj(c, slim)
				return nil
			})
			if err != nil {
				return nil, fmt.Errorf("kubernetes: cluster %s: listing endpointslices: %w", c.name, err)
			}
		}
		s.contact(c, time.Now())
	}
	s.mu.Lock()
	s.listed = true
	s.mu.Unlock()
	return s.files()
}

// syncPage is how many objects a page of Sync's listing holds, so that a
// large cluster is listed in bounded pieces.
const syncPage = 500

// Files are the files of the objects as the source sees them now. The
// store validates every write with them (configstore.Options.Extra), as
// the pipeline will compile it.
func (s *Source) Files() []config.File {
	files, _ := s.files()
	return files
}

// Own is what the config's own files (or the store's objects) hold that
// a cluster's objects could clash with.
type Own struct {
	// Names are the names the own files take, each with what takes it:
	// "service" for a model service, "Cluster" or
	// "ClusterLoadAssignment" for a raw resource (a model service is a
	// Cluster and an assignment of its own name).
	Names map[string]string
	// Endpoints are the own files' endpoints (of the top-level endpoints
	// list) of services they do not define.
	Endpoints map[Endpoint]bool
}

// Endpoint is a service's endpoint: served once per address and port.
type Endpoint struct {
	Service, Address string
	Port             uint32
}

// Reserve names what the config's own files hold: the files win, and a
// cluster's service of one of own's names, or endpoint of own's, is
// dropped with a warning (a cluster's writers never override the files,
// nor block their changes). Files and the updates Run sends from then
// on leave them out.
func (s *Source) Reserve(own Own) {
	s.mu.Lock()
	s.own = own
	s.mu.Unlock()
}

// replace makes a cluster's objects exactly its informers' caches: what
// Sync listed at start and was deleted before the watch began is
// dropped. An event handled after this only sets or deletes again.
func (s *Source) replace(c *cluster, w *watch) {
	services, slices := map[key]*service{}, map[key]*slice{}
	for _, st := range w.svcStores {
		for _, obj := range st.List() {
			if svc, ok := obj.(*corev1.Service); ok {
				if r, err := newService(svc, c.naming); err == nil {
					services[key{svc.Namespace, svc.Name}] = r
				}
			}
		}
	}
	// The slices held are counted anew, each admitted as it is made: the
	// new ones are bounded as they are rendered. They are rendered under
	// s.mu with the Nodes as the node informer's cache has them, so that
	// a Node's change handled meanwhile renders the new slices again, not
	// the old ones.
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, old := range c.slices {
		s.held -= len(old.eps)
	}
	if w.nodeStore != nil {
		s.replaceNodes(c, w.nodeStore)
	}
	c.byNode = map[string]map[key]struct{}{}
	for _, st := range w.sliceStores {
		for _, obj := range st.List() {
			if sl, ok := obj.(*discoveryv1.EndpointSlice); ok {
				k := key{sl.Namespace, sl.Name}
				if r, err := newSliceAt(sl, c.naming, s.check, c.nodes); err == nil {
					s.keepObj(r, sl)
					slices[k] = s.admit(nil, r)
					c.index(k, nil, slices[k])
				}
			}
		}
	}
	c.services, c.slices = services, slices
	// Counted again whole: a change handled meanwhile counted the old map.
	s.held = 0
	for _, c := range s.clusters {
		for _, sl := range c.slices {
			s.held += len(sl.eps)
		}
	}
}

// files renders the current objects, and logs what the clusters' objects
// had dropped from them when that changed (so a warning is not repeated
// at every change) and shows it in each cluster's status. It never fails:
// what cannot be served is dropped, object by object.
func (s *Source) files() ([]config.File, error) {
	s.mu.Lock()
	parts := make([]part, len(s.clusters))
	for i, c := range s.clusters {
		parts[i] = part{cluster: c.name, prefix: c.prefix(), services: c.services, slices: c.slices}
	}
	r := renderAll(parts, bounds{endpoints: s.opts.MaxEndpoints, services: s.opts.MaxServices, own: s.own})
	var changed []source.ClusterStatus
	for _, c := range s.clusters {
		d := r.dropped[c.name]
		c.nodeDrops(d, s.opts.MaxNodes)
		if s.note(c, d, r.overruled[c.name]) {
			changed = append(changed, c.state)
		}
	}
	s.mu.Unlock()
	for _, st := range changed {
		s.report(st)
	}
	return r.files, nil
}

// note puts in c's state what a render dropped of its objects (d) and
// overruled of its settings (o), and logs each when it changed; it says
// whether either did. s.mu is held.
func (s *Source) note(c *cluster, d, o *drops) bool {
	dn, on := d.String(), o.String()
	st := &c.state
	if d.n == st.Dropped && dn == st.DroppedNote && o.n == st.Overruled && on == st.OverruledNote {
		return false
	}
	if d.n > 0 && (d.n != st.Dropped || dn != st.DroppedNote) {
		s.log.Warn("kubernetes: objects dropped: the rest is served", "cluster", c.name, "dropped", d.n, "first", dn)
	}
	if o.n > 0 && (o.n != st.Overruled || on != st.OverruledNote) {
		s.log.Warn("kubernetes: a setting of a service an earlier cluster defines is not served: the earlier cluster's is", "cluster", c.name, "overruled", o.n, "first", on)
	}
	st.Dropped, st.DroppedNote, st.Overruled, st.OverruledNote = d.n, dn, o.n, on
	return true
}

// watch is one cluster's informers.
type watch struct {
	factories              []informers.SharedInformerFactory
	synced                 []cache.InformerSynced
	svcStores, sliceStores []cache.Store
	// nodeFactory and nodeStore are the Nodes' metadata-only watch, with
	// Options.NodeLocalities.
	nodeFactory metadatainformer.SharedInformerFactory
	nodeStore   cache.Store
}

// start starts a cluster's informers, one factory per namespace watched.
// A failed list or watch is recorded as the cluster's last error; the
// informers keep their caches, so the cluster's last objects keep being
// served while client-go retries.
func (s *Source) start(ctx context.Context, c *cluster, w *watch) error {
	for _, ns := range s.namespaces() {
		f := informers.NewSharedInformerFactoryWithOptions(c.cs, 0,
			informers.WithNamespace(ns),
			informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = s.opts.Selector }),
			informers.WithTransform(s.transform))
		w.factories = append(w.factories, f)
		svc := f.Core().V1().Services().Informer()
		sl := f.Discovery().V1().EndpointSlices().Informer()
		for _, inf := range []cache.SharedIndexInformer{svc, sl} {
			if err := inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) { s.failed(c, err) }); err != nil {
				return err
			}
		}
		if _, err := svc.AddEventHandler(s.handler(func(o any) { s.setServiceObj(c, o) }, func(k key) { s.deleteService(c, k) })); err != nil {
			return err
		}
		if _, err := sl.AddEventHandler(s.handler(func(o any) { s.setSliceObj(c, o) }, func(k key) { s.deleteSlice(c, k) })); err != nil {
			return err
		}
		w.synced = append(w.synced, svc.HasSynced, sl.HasSynced)
		w.svcStores, w.sliceStores = append(w.svcStores, svc.GetStore()), append(w.sliceStores, sl.GetStore())
		f.Start(ctx.Done())
	}
	if s.opts.NodeLocalities {
		return s.startNodes(ctx, c, w)
	}
	return nil
}

// Run watches every cluster's Services and EndpointSlices and sends the
// files they make once every cluster's caches have synced, then at each
// change, paced (Options.Quiet and Spacing), until ctx ends. After a Sync
// it sends what Sync listed at once, so that a source merged with this
// one is not held back while an API server is slow or away. Each cluster is probed
// every Options.Probe; one that is away keeps its last objects.
func (s *Source) Run(ctx context.Context, out chan<- source.Update) error {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	watches := make([]*watch, len(s.clusters))
	defer func() {
		// Stopped first (cancel), then waited for.
		cancel()
		for _, w := range watches {
			if w != nil {
				for _, f := range w.factories {
					f.Shutdown()
				}
				if w.nodeFactory != nil {
					w.nodeFactory.Shutdown()
				}
			}
		}
		wg.Wait()
	}()
	synced := make(chan struct{}, len(s.clusters))
	for i, c := range s.clusters {
		watches[i] = &watch{}
		if err := s.start(ctx, c, watches[i]); err != nil {
			return err
		}
		wg.Add(2)
		go func() {
			defer wg.Done()
			s.await(ctx, c, watches[i], synced)
		}()
		go func() {
			defer wg.Done()
			s.probe(ctx, c)
		}()
	}
	s.mu.Lock()
	listed := s.listed
	s.mu.Unlock()
	if !listed {
		for range s.clusters {
			select {
			case <-synced:
			case <-ctx.Done():
				return nil
			}
		}
		// The syncs' pokes (each before its synced) are in the files
		// sent next: not a change to send again.
		select {
		case <-s.changed:
		default:
		}
	}
	if !s.send(ctx, out, time.Now()) {
		return nil
	}
	return s.loop(ctx, out)
}

// await waits for a cluster's caches to sync, makes its objects theirs
// and tells the loop and synced, in that order: Run, waiting for synced
// before its first update, takes the poke as part of it.
func (s *Source) await(ctx context.Context, c *cluster, w *watch, synced chan<- struct{}) {
	if !cache.WaitForCacheSync(ctx.Done(), w.synced...) {
		return // ctx ended
	}
	s.replace(c, w)
	s.contact(c, time.Now())
	s.log.Info("kubernetes: watching services and endpointslices", "cluster", c.name, "namespaces", s.opts.Namespaces, "selector", s.opts.Selector, "nodeLocalities", s.opts.NodeLocalities)
	s.poke()
	synced <- struct{}{}
}

// loop sends the changes, paced: the first after a quiet spell at once,
// a burst's Options.Quiet or Spacing apart.
func (s *Source) loop(ctx context.Context, out chan<- source.Update) error {
	p := source.Pacer{Quiet: s.opts.Quiet, Spacing: s.opts.Spacing}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.changed:
			p.Event(time.Now())
		case <-timer.C:
		}
		if now := time.Now(); p.Fire(now) {
			first := p.First()
			p.Sent(now)
			if !s.send(ctx, out, first) {
				return nil
			}
		}
		if due, ok := p.Due(); ok {
			timer.Reset(max(time.Until(due), 0))
		}
	}
}

// send hands the current files over; false when ctx ended first.
func (s *Source) send(ctx context.Context, out chan<- source.Update, at time.Time) bool {
	if s.opts.OnRead != nil {
		s.opts.OnRead()
	}
	files, err := s.files()
	select {
	case out <- source.Update{Files: files, Err: err, AcceptedAt: at}:
		return true
	case <-ctx.Done():
		return false
	}
}

// handler calls set on an add or update and del on a delete, then pokes
// the loop.
func (s *Source) handler(set func(any), del func(key)) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { set(obj); s.poke() },
		UpdateFunc: func(_, obj any) { set(obj); s.poke() },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if m, ok := obj.(metav1.Object); ok {
				del(key{m.GetNamespace(), m.GetName()})
				s.poke()
			}
		},
	}
}

func (s *Source) poke() {
	if s.opts.OnEvent != nil {
		s.opts.OnEvent()
	}
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

func (s *Source) setServiceObj(c *cluster, obj any) {
	if svc, ok := obj.(*corev1.Service); ok {
		s.setService(c, svc)
	}
}

func (s *Source) setSliceObj(c *cluster, obj any) {
	if sl, ok := obj.(*discoveryv1.EndpointSlice); ok {
		s.setSlice(c, sl)
	}
}

// setService renders one Service's contribution, replacing its last.
func (s *Source) setService(c *cluster, svc *corev1.Service) {
	r, err := newService(svc, c.naming)
	if err != nil {
		s.log.Warn("kubernetes: service left out", "cluster", c.name, "namespace", svc.Namespace, "name", svc.Name, "error", err)
		return
	}
	s.mu.Lock()
	c.services[key{svc.Namespace, svc.Name}] = r
	s.mu.Unlock()
}

// setSlice renders one slice's contribution, replacing its last: a
// change of one slice renders that slice alone.
func (s *Source) setSlice(c *cluster, sl *discoveryv1.EndpointSlice) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.renderSlice(c, key{sl.Namespace, sl.Name}, sl)
}

// renderSlice renders sl, the slice k, in place of its last, with the
// Nodes' localities as they are now: rendered under s.mu, so that a
// Node's relabelling meanwhile is not lost. s.mu is held.
func (s *Source) renderSlice(c *cluster, k key, sl *discoveryv1.EndpointSlice) {
	r, err := newSliceAt(sl, c.naming, s.check, c.nodes)
	if err != nil {
		s.log.Warn("kubernetes: endpointslice left out", "cluster", c.name, "namespace", sl.Namespace, "name", sl.Name, "error", err)
		return
	}
	s.keepObj(r, sl)
	old := c.slices[k]
	c.slices[k] = s.admit(old, r)
	c.index(k, old, c.slices[k])
}

// keepObj keeps in r the slice it was rendered from and its endpoints'
// nodes, with Options.NodeLocalities (a Node's relabelling renders it
// again from them).
func (s *Source) keepObj(r *slice, sl *discoveryv1.EndpointSlice) {
	if s.opts.NodeLocalities {
		r.obj, r.nodes = sl, sliceNodes(sl)
	}
}

// admit is the slice r to hold in place of old: r itself, or an empty one
// saying it is dropped when the slices held would be over twice
// MaxEndpoints (the render leaves out duplicates and slices of no
// Service, so the rendered endpoints are bounded again there): what the
// source holds stays bounded whatever a cluster sends. s.mu is held.
func (s *Source) admit(old, r *slice) *slice {
	if old != nil {
		s.held -= len(old.eps)
	}
	if limit := 2 * s.opts.MaxEndpoints; s.held+len(r.eps) > limit {
		out := &slice{obj: r.obj, nodes: r.nodes}
		out.dropped.add("its %d endpoints would make the slices held over %d: dropped whole; narrow the source with --kube-namespaces", len(r.eps), limit)
		return out
	}
	s.held += len(r.eps)
	return r
}

func (s *Source) deleteService(c *cluster, k key) {
	s.mu.Lock()
	delete(c.services, k)
	s.mu.Unlock()
}

func (s *Source) deleteSlice(c *cluster, k key) {
	s.mu.Lock()
	if old := c.slices[k]; old != nil {
		s.held -= len(old.eps)
		c.index(k, old, nil)
	}
	delete(c.slices, k)
	s.mu.Unlock()
}

// transform is transformWith the node of each endpoint kept when the
// Nodes' localities are read.
func (s *Source) transform(obj any) (any, error) {
	return transformWith(obj, s.opts.NodeLocalities)
}

// transform drops what Pylon does not read before an object is cached:
// managed fields, annotations, owners; a Service's spec but its ports and
// traffic distribution; an
// endpoint's target, node and hints. The informers' caches hold a fraction
// of the objects' size.
func transform(obj any) (any, error) { return transformWith(obj, false) }

// transformWith is transform, keeping each endpoint's node if nodes.
func transformWith(obj any, nodes bool) (any, error) {
	switch o := obj.(type) {
	case *corev1.Service:
		return &corev1.Service{
			ObjectMeta: slimMeta(o.ObjectMeta),
			Spec:       corev1.ServiceSpec{Ports: o.Spec.Ports, ClusterIP: o.Spec.ClusterIP, TrafficDistribution: o.Spec.TrafficDistribution},
		}, nil
	case *discoveryv1.EndpointSlice:
		eps := make([]discoveryv1.Endpoint, len(o.Endpoints))
		for i, e := range o.Endpoints {
			eps[i] = discoveryv1.Endpoint{Addresses: e.Addresses, Conditions: e.Conditions, Zone: e.Zone}
			if nodes {
				eps[i].NodeName = e.NodeName
			}
		}
		return &discoveryv1.EndpointSlice{
			ObjectMeta: slimMeta(o.ObjectMeta), AddressType: o.AddressType, Endpoints: eps, Ports: o.Ports,
		}, nil
	}
	return obj, nil
}

// slimMeta keeps what the informer and the source need of an object's
// metadata: of its labels, only the slice's Service and its maker (the
// selector is applied by the API server).
func slimMeta(m metav1.ObjectMeta) metav1.ObjectMeta {
	var labels map[string]string
	for _, l := range []string{discoveryv1.LabelServiceName, labelManagedBy} {
		if v, ok := m.Labels[l]; ok {
			if labels == nil {
				labels = map[string]string{}
			}
			labels[l] = v
		}
	}
	return metav1.ObjectMeta{
		Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion,
		Labels: labels, DeletionTimestamp: m.DeletionTimestamp,
	}
}

// LogThrough sends client-go's log (klog, which writes to stderr
// otherwise) to log. klog is one for the whole process: the daemon calls
// this once.
func LogThrough(log *slog.Logger) {
	if log != nil {
		klog.SetSlogLogger(log.With("from", "client-go"))
	}
}
