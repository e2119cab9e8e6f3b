package xdstype

import (
	"time"

	"google.golang.org/protobuf/proto"
)

// Resource is one resource as a config states it: the message of a
// registered type, its name, and where it was written. The config loader
// decodes raw resources into it, the compiler translates the model into
// it, and the snapshot builder validates and encodes it.
type Resource struct {
	Type    *Type
	Name    string
	Message proto.Message
	// TTL, from a raw entry's "@ttl", is sent with the resource to clients
	// that support TTLs (xDS "Resource.ttl") and refreshed by heartbeats,
	// so that they drop it if Pylon stops refreshing it (zero: no TTL).
	TTL  time.Duration
	File string
	Line int
}
