package source

import "time"

// Status is what the sources say of themselves in GET /status and pylon
// status, beside the config's own revision.
type Status struct {
	// Kubernetes are the clusters of the Kubernetes source, in the order
	// given.
	Kubernetes []ClusterStatus `json:"kubernetes,omitempty"`
}

// ClusterStatus is one Kubernetes cluster as the source sees it.
type ClusterStatus struct {
	Name string `json:"name"`
	// Connected: its API server answered the last probe. Not connected,
	// its last services and endpoints keep being served.
	Connected bool `json:"connected"`
	// Since is when Connected last changed (the source's start at first).
	Since time.Time `json:"since"`
	// LastContact is when the cluster last answered: its caches' listing
	// or a probe.
	LastContact time.Time `json:"lastContact,omitzero"`
	// LastError is the last failed probe, list or watch, bounded, with
	// no credentials; LastErrorAt when it happened.
	LastError   string    `json:"lastError,omitempty"`
	LastErrorAt time.Time `json:"lastErrorAt,omitzero"`
	// Degraded: connected, but a list or watch was refused (RBAC changed,
	// say) and no listing since succeeded: its objects may be stale.
	Degraded bool `json:"degraded,omitempty"`
	// Dropped counts the cluster's objects and parts of objects not
	// served (a port out of range, a denied address, a slice over its
	// bound, a service the config's files define); DroppedNote says what
	// the first few were, bounded.
	Dropped     int    `json:"dropped,omitempty"`
	DroppedNote string `json:"droppedNote,omitempty"`
	// Overruled counts the cluster's settings not served because a
	// cluster given before it defines the same service otherwise (a
	// Service's trafficDistribution): the earlier cluster's is served,
	// and the services and endpoints are. OverruledNote says what the
	// first few were, bounded.
	Overruled     int    `json:"overruled,omitempty"`
	OverruledNote string `json:"overruledNote,omitempty"`
}
