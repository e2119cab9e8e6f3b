package status

// RelayKey is one key of a relay's report of its downstream proxies: their
// counts and the relay's version of the key, never their names. The relay
// posts it to its upstream (POST /v1/relays/{id}), which keeps it and
// carries it to the other replicas in its fleet-status summary.
type RelayKey struct {
	Key     string `json:"key"`
	Version string `json:"version,omitempty"`
	Proxies int    `json:"proxies"`
	ACKed   int    `json:"acked"`
	NACKed  int    `json:"nacked"`
	Pending int    `json:"pending"`
}
