package cli

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// relayKeys is a relay's report in /proxies: its downstream proxies per
// key, as the relay said (counts only, never a node's name), and the
// replica it reports to; Stale, read from that replica's summary while
// etcd cannot be read.
type relayKeys struct {
	Relay      string `json:"relay"`
	Identity   string `json:"identity"`
	Replica    string `json:"replica"`
	Stale      bool   `json:"stale"`
	ReportedAt string `json:"reportedAt"`
	Keys       []struct {
		Key                             string
		Version                         string
		Proxies, ACKed, NACKed, Pending int
	} `json:"keys"`
}

// relaysTable lists the proxies behind relays, apart from the streams
// this server serves: they are the relays' reports, not streams it sees.
// A stale report's states show UNKNOWN, as other replicas' stale streams
// do: their counts as last read may no longer hold.
func relaysTable(out io.Writer, relays []relayKeys) error {
	if len(relays) == 0 {
		return nil
	}
	fmt.Fprintln(out, "\nBehind relays (as each relay reports; counts per key):")
	tw := tabwriter.NewWriter(out, 0, 0, 3, ' ', 0)
	fmt.Fprintln(tw, "RELAY\tREPLICA\tKEY\tPROXIES\tACKED\tNACKED\tPENDING\tVERSION")
	for _, r := range relays {
		name := printable(r.Relay)
		if r.Identity != "" {
			name += " (" + printable(r.Identity) + ")"
		}
		for _, k := range r.Keys {
			acked, nacked, pending := fmt.Sprint(k.ACKed), fmt.Sprint(k.NACKed), fmt.Sprint(k.Pending)
			if r.Stale {
				acked, nacked, pending = unknown, unknown, unknown
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", printable(name), printable(r.Replica), printable(k.Key), k.Proxies, acked, nacked, pending, printable(k.Version))
		}
	}
	return tw.Flush()
}
