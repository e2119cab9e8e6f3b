package status

// The bounds the external tests (package status_test) test at.
const (
	LatencySamples = latencySamples
	RingShards     = ringShards
	MaxPending     = maxPending
)
