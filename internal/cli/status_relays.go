package cli

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// relayKeys is a relay's report in /proxies: its downstream proxies per
// key, as the relay said (counts only, never a node's name).
type relayKeys struct {
	Relay      string `json:"relay"`
	Identity   string `json:"identity"`
	ReportedAt string `json:"reportedAt"`
	Keys       []struct {
		Key                             string
		Version                         string
		Proxies, ACKed, NACKed, Pending int
	} `json:"keys"`
}

// relaysTable lists the proxies behind relays, apart from the streams
// this server serves: they are the relays' reports, not streams it sees.
func relaysTable(out io.Writer, relays []relayKeys) error {
	if len(relays) == 0 {
		return nil
	}
	fmt.Fprintln(out, "\nBehind relays (as each relay reports; counts per key):")
	tw := tabwriter.NewWriter(out, 0, 0, 3, ' ', 0)
	fmt.Fprintln(tw, "RELAY\tKEY\tPROXIES\tACKED\tNACKED\tPENDING\tVERSION")
	for _, r := range relays {
		name := printable(r.Relay)
		if r.Identity != "" {
			name += " (" + printable(r.Identity) + ")"
		}
		for _, k := range r.Keys {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%s\n", printable(name), printable(k.Key), k.Proxies, k.ACKed, k.NACKed, k.Pending, printable(k.Version))
		}
	}
	return tw.Flush()
}
