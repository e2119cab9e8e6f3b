package upstream

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
)

// otherShard is what a Pylon replica serving some groups (`pylon serve
// --groups`) says, with FAILED_PRECONDITION, to a node of another group.
const otherShard = "which this replica does not serve"

// shardAt finds the addresses such a refusal names: "replica R serves it
// (--groups G) at ADDR", given to a client whose certificate is verified.
var shardAt = regexp.MustCompile(`\) at ([^\s;()]+)`)

// maxRefusal bounds the refusal kept and shown: the upstream's text.
const maxRefusal = 1 << 10

// refusal reads a stream's end: when addr refused the key because another
// shard serves its group, what to show of it and the address to retry at
// (one of Known named by the refusal; "" for none).
func (c *Client) refusal(addr string, err error) (shown, next string) {
	st, ok := grpcstatus.FromError(err)
	if !ok || st.Code() != codes.FailedPrecondition || !strings.Contains(st.Message(), otherShard) {
		return "", ""
	}
	msg := st.Message()
	if len(msg) > maxRefusal {
		msg = msg[:maxRefusal] + "…"
	}
	shown = fmt.Sprintf("upstream %s refused the key: %s", addr, msg)
	var named []string
	for _, m := range shardAt.FindAllStringSubmatch(st.Message(), maxNamed) {
		if m[1] == addr {
			continue
		}
		if slices.Contains(c.o.Known, m[1]) {
			return shown + "; retrying at " + m[1], m[1]
		}
		named = append(named, m[1])
	}
	if len(named) > 0 {
		return shown + "; " + strings.Join(named, ", ") + " is not one of this relay's upstreams (--upstream, --upstream-for): not retried there", ""
	}
	return shown + "; it names no address (the relay's certificate is not verified upstream, or no live replica serves the group)", ""
}

// maxNamed bounds the addresses read from one refusal.
const maxNamed = 8

// Refused is the key's last refusal by an upstream serving other groups:
// kept while the key is served only where a refusal pointed, "" once one
// of its own upstreams answers it.
func (c *Client) Refused() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.refused
}
