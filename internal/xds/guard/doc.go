// Package guard holds the xDS server's bounds against clients that flood
// or stall it: admission (how many streams start a second, how many first,
// full-state responses are sent at once), the watch on each send (a send
// outliving its bound gives its slot back, then gets its connection
// closed), and the connections it tracks (Conns): each socket write
// bounded, a stalled stream's connection evicted, how each connection
// ended read from the HTTP/2 frames gRPC writes, and its verified client
// certificate held to its expiry and to the client CAs of the day. It
// knows nothing of streams or resources; the server reports (Reporter)
// and refuses with what it returns.
package guard
