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
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/source"
)

// Options configures a Source.
type Options struct {
	// Kubeconfig is a kubeconfig file; "" with InCluster uses the pod's
	// service account.
	Kubeconfig string
	InCluster  bool
	// Cluster names the cluster in the files' paths (default "cluster").
	Cluster string
	// Namespaces limits the watch to these namespaces (default: all).
	Namespaces []string
	// Selector is a label selector for Services and EndpointSlices (the
	// endpoints' controller copies a Service's labels to its slices).
	Selector string
	// Quiet and MaxWait debounce bursts of changes.
	Quiet, MaxWait time.Duration
	// MaxEndpoints bounds the endpoints served (default 200,000): past
	// it the source reports an error and the last good config stays.
	MaxEndpoints int
	Logger       *slog.Logger
	// OnEvent and OnRead, if set, are told of each object change and each
	// config handed over (for metrics, as the file source does).
	OnEvent, OnRead func()
}

// DefaultMaxEndpoints is Options.MaxEndpoints' default.
const DefaultMaxEndpoints = 200_000

// Source watches one cluster.
type Source struct {
	opts Options
	log  *slog.Logger
	cs   kubernetes.Interface

	mu       sync.Mutex
	services map[key]*service
	slices   map[key]*slice
	// changed is poked, one slot, whenever an object changes.
	changed chan struct{}
	// listed: Sync has listed the objects.
	listed bool
}

// New returns a source for opts: it reads the kubeconfig (or the pod's
// service account) and checks the selector, and connects to nothing yet.
func New(opts Options) (*Source, error) {
	if (opts.Kubeconfig == "") == !opts.InCluster {
		return nil, errors.New("kubernetes: give a kubeconfig or in-cluster, not both")
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
	var cfg *rest.Config
	var err error
	if opts.Kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", opts.Kubeconfig)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes: %w", err)
	}
	cfg.UserAgent = "pylon"
	// No cfg.Timeout: it would cut every watch short. Sync is bounded by
	// its context, and the informers' lists and watches by client-go's
	// own timeouts.
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes: %w", err)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Source{
		opts: opts, log: log, cs: cs,
		services: map[key]*service{}, slices: map[key]*slice{}, changed: make(chan struct{}, 1),
	}, nil
}

// prefix is where the source's files are named.
func (s *Source) prefix() string { return "kubernetes/" + s.opts.Cluster }

// namespaces are the namespaces watched, metav1.NamespaceAll for all.
func (s *Source) namespaces() []string {
	if len(s.opts.Namespaces) == 0 {
		return []string{metav1.NamespaceAll}
	}
	return s.opts.Namespaces
}

// Sync lists the cluster's Services and EndpointSlices once and returns
// the files they make: the daemon's first config, before anything
// listens, includes them, so that a config naming them is good from the
// start. ctx bounds it.
func (s *Source) Sync(ctx context.Context) ([]config.File, error) {
	list := metav1.ListOptions{LabelSelector: s.opts.Selector}
	for _, ns := range s.namespaces() {
		svcs, err := s.cs.CoreV1().Services(ns).List(ctx, list)
		if err != nil {
			return nil, fmt.Errorf("kubernetes: listing services: %w", err)
		}
		for i := range svcs.Items {
			s.setService(&svcs.Items[i])
		}
		slices, err := s.cs.DiscoveryV1().EndpointSlices(ns).List(ctx, list)
		if err != nil {
			return nil, fmt.Errorf("kubernetes: listing endpointslices: %w", err)
		}
		for i := range slices.Items {
			s.setSlice(&slices.Items[i])
		}
	}
	s.mu.Lock()
	s.listed = true
	s.mu.Unlock()
	return s.files()
}

// Files are the files of the objects as the source sees them now; nil
// when they cannot be rendered (over MaxEndpoints). The store validates
// every write with them (configstore.Options.Extra), as the pipeline
// will compile it.
func (s *Source) Files() []config.File {
	files, _ := s.files()
	return files
}

// replace makes the source's objects exactly the informers' caches:
// what Sync listed at start and was deleted before the watch began is
// dropped. An event handled after this only sets or deletes again.
func (s *Source) replace(svcStores, sliceStores []cache.Store) {
	services, slices := map[key]*service{}, map[key]*slice{}
	for _, st := range svcStores {
		for _, obj := range st.List() {
			if svc, ok := obj.(*corev1.Service); ok {
				if r, err := newService(svc); err == nil {
					services[key{svc.Namespace, svc.Name}] = r
				}
			}
		}
	}
	for _, st := range sliceStores {
		for _, obj := range st.List() {
			if sl, ok := obj.(*discoveryv1.EndpointSlice); ok {
				if r, err := newSlice(sl); err == nil {
					slices[key{sl.Namespace, sl.Name}] = r
				}
			}
		}
	}
	s.mu.Lock()
	s.services, s.slices = services, slices
	s.mu.Unlock()
}

// files renders the current objects.
func (s *Source) files() ([]config.File, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return render(s.prefix(), s.services, s.slices, s.opts.MaxEndpoints)
}

// Run watches Services and EndpointSlices and sends the files they make
// once the informers' caches have synced, then after every debounced
// burst of changes, until ctx ends. After a Sync it sends what Sync
// listed at once, so that a source merged with this one is not held back
// while the API server is slow or away.
func (s *Source) Run(ctx context.Context, out chan<- source.Update) error {
	ctx, cancel := context.WithCancel(ctx)
	var factories []informers.SharedInformerFactory
	defer func() {
		// Stopped first (cancel), then waited for.
		cancel()
		for _, f := range factories {
			f.Shutdown()
		}
	}()
	var synced []cache.InformerSynced
	var svcStores, sliceStores []cache.Store
	for _, ns := range s.namespaces() {
		f := informers.NewSharedInformerFactoryWithOptions(s.cs, 0,
			informers.WithNamespace(ns),
			informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = s.opts.Selector }),
			informers.WithTransform(transform))
		factories = append(factories, f)
		svc := f.Core().V1().Services().Informer()
		sl := f.Discovery().V1().EndpointSlices().Informer()
		if _, err := svc.AddEventHandler(s.handler(s.setServiceObj, s.deleteService)); err != nil {
			return err
		}
		if _, err := sl.AddEventHandler(s.handler(s.setSliceObj, s.deleteSlice)); err != nil {
			return err
		}
		synced = append(synced, svc.HasSynced, sl.HasSynced)
		svcStores, sliceStores = append(svcStores, svc.GetStore()), append(sliceStores, sl.GetStore())
		f.Start(ctx.Done())
	}
	s.mu.Lock()
	listed := s.listed
	s.mu.Unlock()
	if listed && !s.send(ctx, out, time.Now()) {
		return nil
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return nil // ctx ended
	}
	s.replace(svcStores, sliceStores)
	s.log.Info("kubernetes: watching services and endpointslices", "cluster", s.opts.Cluster, "namespaces", s.opts.Namespaces, "selector", s.opts.Selector)
	if !s.send(ctx, out, time.Now()) {
		return nil
	}
	return s.loop(ctx, out)
}

// loop debounces changes into updates.
func (s *Source) loop(ctx context.Context, out chan<- source.Update) error {
	d := source.Debouncer{Quiet: s.opts.Quiet, MaxWait: s.opts.MaxWait}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.changed:
			d.Event(time.Now())
		case now := <-timer.C:
			first := d.First()
			if d.Fire(now) && !s.send(ctx, out, first) {
				return nil
			}
		}
		if due, ok := d.Due(); ok {
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

func (s *Source) setServiceObj(obj any) {
	if svc, ok := obj.(*corev1.Service); ok {
		s.setService(svc)
	}
}

func (s *Source) setSliceObj(obj any) {
	if sl, ok := obj.(*discoveryv1.EndpointSlice); ok {
		s.setSlice(sl)
	}
}

// setService renders one Service's contribution, replacing its last.
func (s *Source) setService(svc *corev1.Service) {
	r, err := newService(svc)
	if err != nil {
		s.log.Warn("kubernetes: service left out", "namespace", svc.Namespace, "name", svc.Name, "error", err)
		return
	}
	s.mu.Lock()
	s.services[key{svc.Namespace, svc.Name}] = r
	s.mu.Unlock()
}

// setSlice renders one slice's contribution, replacing its last: a
// change of one slice renders that slice alone.
func (s *Source) setSlice(sl *discoveryv1.EndpointSlice) {
	r, err := newSlice(sl)
	if err != nil {
		s.log.Warn("kubernetes: endpointslice left out", "namespace", sl.Namespace, "name", sl.Name, "error", err)
		return
	}
	s.mu.Lock()
	s.slices[key{sl.Namespace, sl.Name}] = r
	s.mu.Unlock()
}

func (s *Source) deleteService(k key) {
	s.mu.Lock()
	delete(s.services, k)
	s.mu.Unlock()
}

func (s *Source) deleteSlice(k key) {
	s.mu.Lock()
	delete(s.slices, k)
	s.mu.Unlock()
}

// transform drops what Pylon does not read before an object is cached:
// managed fields, annotations, owners; a Service's spec but its ports; an
// endpoint's target, node and hints. The informers' caches hold a fraction
// of the objects' size.
func transform(obj any) (any, error) {
	switch o := obj.(type) {
	case *corev1.Service:
		return &corev1.Service{
			ObjectMeta: slimMeta(o.ObjectMeta),
			Spec:       corev1.ServiceSpec{Ports: o.Spec.Ports, ClusterIP: o.Spec.ClusterIP},
		}, nil
	case *discoveryv1.EndpointSlice:
		eps := make([]discoveryv1.Endpoint, len(o.Endpoints))
		for i, e := range o.Endpoints {
			eps[i] = discoveryv1.Endpoint{Addresses: e.Addresses, Conditions: e.Conditions, Zone: e.Zone}
		}
		return &discoveryv1.EndpointSlice{
			ObjectMeta: slimMeta(o.ObjectMeta), AddressType: o.AddressType, Endpoints: eps, Ports: o.Ports,
		}, nil
	}
	return obj, nil
}

// slimMeta keeps what the informer and the source need of an object's
// metadata.
func slimMeta(m metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion,
		Labels: m.Labels, DeletionTimestamp: m.DeletionTimestamp,
	}
}
