package route

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteText writes a result for people: one line per step the request
// takes, the clusters with their endpoints, then what was not simulated.
// Values from the config and the request are quoted where they could hold
// anything (%q), so that a name cannot write to the terminal.
func WriteText(w io.Writer, r *Result) error { return WriteTextAfter(w, nil, r) }

// WriteTextAfter is WriteText with the caller's own lines first (label,
// value; the value already quoted where it needs to be), aligned with the
// result's.
func WriteTextAfter(w io.Writer, head [][2]string, r *Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, h := range head {
		fmt.Fprintf(tw, "%s\t%s\n", h[0], h[1])
	}
	fmt.Fprintf(tw, "request\t%s\n", quoteLine(r.Request.String()))
	for _, h := range r.Request.HeaderLines() {
		fmt.Fprintf(tw, "  header\t%s\n", quoteLine(h))
	}
	if l := r.Listener; l != nil {
		fmt.Fprintf(tw, "listener\t%q", l.Name)
		if l.Port != 0 {
			fmt.Fprintf(tw, " (%s:%d)", l.Address, l.Port)
		}
		fmt.Fprintf(tw, ", found by %s\n", l.How)
		if l.FilterChain != "" {
			fmt.Fprintf(tw, "filter chain\t%q", l.FilterChain)
			if l.ChainMatch != "" {
				fmt.Fprintf(tw, " (%s)", l.ChainMatch)
			}
			fmt.Fprintln(tw)
		}
	}
	if r.RouteConfig != "" {
		fmt.Fprintf(tw, "route config\t%q (%s)\n", r.RouteConfig, r.RouteConfigFrom)
	}
	if v := r.VirtualHost; v != nil {
		fmt.Fprintf(tw, "virtual host\t%q (host %q matched %s domain %q)\n", v.Name, v.Host, v.Kind, v.Domain)
	}
	if rt := r.Route; rt != nil {
		fmt.Fprintf(tw, "route\t%s (%s)\n", quoteLine(rt.ID), rt.Match)
	}
	writeAction(tw, r)
	fmt.Fprintf(tw, "outcome\t%s\n", r.Outcome)
	if len(r.GRPCNACK) > 0 {
		fmt.Fprintf(tw, "gRPC NACK\ta gRPC client rejects the listener or route config below whole and keeps the version it last ACKed: what it runs is not what is explained here\n")
		for _, why := range r.GRPCNACK {
			fmt.Fprintf(tw, "  because\t%s\n", quoteLine(why))
		}
	}
	for _, c := range r.GRPCClients {
		writeClient(tw, c)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	writeClusters(w, r.Clusters)
	for _, n := range r.NotSimulated {
		fmt.Fprintf(w, "not simulated: %s\n", n)
	}
	return nil
}

// writeClient says what one gRPC client does with the call, and each rule
// of its that what it fetches breaks.
func writeClient(w io.Writer, c *ClientCheck) {
	fmt.Fprintf(w, "gRPC client\t%s (%s), rules of %s\n", c.Client, quoteLine(c.From), c.RulesFrom)
	fmt.Fprintf(w, "  this call\t%s\n", quoteLine(c.Call))
	if c.Passes {
		fmt.Fprintf(w, "  passes\twhat it fetches for the target breaks none of its rules\n")
	}
	for _, p := range c.Problems {
		line := fmt.Sprintf("%s %q: %s: %s (rule %s, %s)", p.Type, p.Name, p.Field, p.Message, p.Rule, p.Docs)
		fmt.Fprintf(w, "  %s\t%s\n", p.Effect, quoteLine(line))
	}
	if c.More > 0 {
		fmt.Fprintf(w, "  \tand %d more\n", c.More)
	}
}

func writeAction(w io.Writer, r *Result) {
	if rd := r.Redirect; rd != nil {
		fmt.Fprintf(w, "redirect\t%d to %s\n", rd.Code, quoteLine(rd.Location))
	}
	if d := r.Direct; d != nil {
		fmt.Fprintf(w, "direct response\t%d", d.Status)
		if d.Body != "" {
			fmt.Fprintf(w, " body %q", shortBody(d.Body))
		}
		fmt.Fprintln(w)
	}
}

func writeClusters(w io.Writer, cs []ClusterShare) {
	for _, c := range cs {
		fmt.Fprintf(w, "cluster %q  %s", c.Name, percent(c.Share))
		if c.Weight != 0 {
			fmt.Fprintf(w, " (weight %d)", c.Weight)
		}
		switch {
		case c.Missing:
			fmt.Fprint(w, "  MISSING: the node has no such cluster")
		case c.Type != "":
			fmt.Fprintf(w, "  %s", c.Type)
		}
		fmt.Fprintln(w)
		if len(c.Endpoints) == 0 && !c.Missing {
			fmt.Fprintln(w, "  no endpoints")
			continue
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		if len(c.Endpoints) > 0 {
			fmt.Fprintln(tw, "  ENDPOINT\tLOCALITY\tPRIORITY\tHEALTH\tWEIGHT\tSERVING")
		}
		for _, e := range c.Endpoints {
			loc := locality(e)
			serving := "no"
			if e.Serving {
				serving = "yes"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\t%d\t%s\n", quoteLine(e.Address), quoteLine(loc), e.Priority, e.Health, e.Weight, serving)
		}
		_ = tw.Flush()
	}
}

// quoteLine quotes s when it holds anything but printable ASCII without
// spaces at the ends, so that the terminal shows it as text.
func quoteLine(s string) string {
	for _, r := range s {
		if r < 0x20 || r > 0x7e {
			return fmt.Sprintf("%q", s)
		}
	}
	return s
}

func shortBody(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

// locality is region/zone/sub_zone, "-" for a part not set, without the
// trailing parts not set ("-" alone: none).
func locality(e Endpoint) string {
	parts := []string{e.Region, e.Zone, e.SubZone}
	for len(parts) > 1 && parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	for i, p := range parts {
		if p == "" {
			parts[i] = "-"
		}
	}
	return strings.Join(parts, "/")
}
