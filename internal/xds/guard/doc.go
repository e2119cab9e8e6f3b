// Package guard holds the xDS server's bounds against clients that flood
// or stall it: admission (how many streams start a second, how many first,
// full-state responses are sent at once) and the watch on each send (a
// send outliving its bound gives its slot back, then gets its connection
// closed). It knows nothing of streams or resources; the server reports
// and refuses with what it returns.
package guard
