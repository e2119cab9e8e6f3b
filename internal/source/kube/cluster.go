package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/pylon-xds/pylon/internal/redact"
	"github.com/pylon-xds/pylon/internal/source"
)

// cluster is one cluster's client, objects and state; the objects and
// the state are guarded by the Source's mu.
type cluster struct {
	name   string
	naming naming
	cs     kubernetes.Interface
	// md reads objects' metadata alone (the Nodes' labels).
	md metadata.Interface

	services map[key]*service
	slices   map[key]*slice
	state    source.ClusterStatus
	// nodes are the Nodes' localities (of those with a topology label),
	// nodeNotes why a Node's are not read, and byNode the slices with
	// endpoints on each Node; all empty without Options.NodeLocalities.
	nodes     map[string]locality
	nodeNotes map[string]string
	byNode    map[string]map[key]struct{}
}

// newCluster is a cluster reached with kubeconfig, or the pod's service
// account for "". It connects to nothing yet.
func newCluster(name, kubeconfig string, n naming) (*cluster, error) {
	var cfg *rest.Config
	var err error
	if kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes: %w", err)
	}
	cfg.UserAgent = "pylon"
	// No cfg.Timeout: it would cut every watch short. Sync is bounded by
	// its context, the probes by theirs, and the informers' lists and
	// watches by client-go's own timeouts.
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes: %w", err)
	}
	md, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes: %w", err)
	}
	return &cluster{
		name: name, naming: n, cs: cs, md: md, services: map[key]*service{}, slices: map[key]*slice{},
		state: source.ClusterStatus{Name: name, Since: time.Now()},
		nodes: map[string]locality{}, nodeNotes: map[string]string{}, byNode: map[string]map[key]struct{}{},
	}, nil
}

// clusterName is a cluster's name: a DNS label of at most 32 characters,
// since it names files, a metric label, a locality region and (kept
// apart) a prefix of service names.
var clusterName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,30}[a-z0-9])?$`)

// CheckName refuses a cluster name that is not a short DNS label.
func CheckName(name string) error {
	if !clusterName.MatchString(name) {
		return fmt.Errorf("--kube-cluster %q: a cluster's name is 1 to 32 lowercase letters, digits and '-', starting and ending with a letter or digit", name)
	}
	return nil
}

// maxError bounds a cluster's last error as shown.
const maxError = 512

// Status is each cluster's state, in the order given: reachable or not
// since when, its last contact and its last error.
func (s *Source) Status() source.Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := source.Status{Kubernetes: make([]source.ClusterStatus, len(s.clusters))}
	for i, c := range s.clusters {
		out.Kubernetes[i] = c.state
	}
	return out
}

// contact records that c answered at now.
func (s *Source) contact(c *cluster, now time.Time) {
	s.mu.Lock()
	if !c.state.Connected {
		c.state.Connected, c.state.Since = true, now
		s.log.Info("kubernetes: cluster reachable", "cluster", c.name)
	}
	c.state.LastContact = now
	st := c.state
	s.mu.Unlock()
	s.report(st)
}

// failed records c's failed list or watch, reported by client-go while
// it retries: its last error, and, unless routine (a watch expired, a
// connection closed), degraded until a listing succeeds again (the probe
// tries one). The probe alone decides reachability.
func (s *Source) failed(c *cluster, err error) {
	s.setError(c, err, false)
	if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return
	}
	s.mu.Lock()
	if !c.state.Degraded {
		c.state.Degraded = true
		s.log.Warn("kubernetes: a list or watch is refused: serving the cluster's last services and endpoints", "cluster", c.name, "error", c.state.LastError)
	}
	st := c.state
	s.mu.Unlock()
	s.report(st)
}

// relist tries, for a degraded cluster, to list each resource in each
// namespace watched (one object each): when all are allowed again, it is
// no longer degraded (client-go's informers relist on their own).
func (s *Source) relist(ctx context.Context, c *cluster) {
	s.mu.Lock()
	degraded := c.state.Degraded
	s.mu.Unlock()
	if !degraded {
		return
	}
	one := metav1.ListOptions{LabelSelector: s.opts.Selector, Limit: 1}
	for _, ns := range s.namespaces() {
		if _, err := c.cs.CoreV1().Services(ns).List(ctx, one); err != nil {
			s.setError(c, err, false)
			return
		}
		if _, err := c.cs.DiscoveryV1().EndpointSlices(ns).List(ctx, one); err != nil {
			s.setError(c, err, false)
			return
		}
	}
	if s.opts.NodeLocalities {
		if _, err := c.md.Resource(nodesGVR).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
			s.setError(c, err, false)
			return
		}
	}
	s.mu.Lock()
	c.state.Degraded = false
	st := c.state
	s.mu.Unlock()
	s.log.Info("kubernetes: lists and watches allowed again", "cluster", c.name)
	s.report(st)
}

func (s *Source) setError(c *cluster, err error, down bool) {
	msg := redact.String(err.Error())
	if len(msg) > maxError {
		msg = msg[:maxError] + "..."
	}
	now := time.Now()
	s.mu.Lock()
	if down && c.state.Connected {
		c.state.Connected, c.state.Since = false, now
		s.log.Warn("kubernetes: cluster unreachable: serving its last services and endpoints", "cluster", c.name, "error", msg)
	}
	c.state.LastError, c.state.LastErrorAt = msg, now
	st := c.state
	s.mu.Unlock()
	s.report(st)
}

func (s *Source) report(st source.ClusterStatus) {
	if s.opts.OnCluster != nil {
		s.opts.OnCluster(st)
	}
}

// probe asks c's API server every Options.Probe whether it is ready
// (GET /readyz, which every authenticated user may read), until ctx ends.
func (s *Source) probe(ctx context.Context, c *cluster) {
	tick := time.NewTicker(s.opts.Probe)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		pctx, cancel := context.WithTimeout(ctx, s.opts.Probe)
		err := c.cs.Discovery().RESTClient().Get().AbsPath("/readyz").Do(pctx).Error()
		switch {
		case ctx.Err() != nil:
			cancel()
			return
		case err != nil:
			s.setError(c, err, true)
		default:
			s.contact(c, time.Now())
			s.relist(pctx, c)
		}
		cancel()
	}
}
