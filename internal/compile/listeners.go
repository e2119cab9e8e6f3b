package compile

import (
	"fmt"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"

	"github.com/pylon-xds/pylon/internal/diag"
	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// listenerClashes refuses two Listeners on one address and port in one
// snapshot: Envoy rejects the second ("has duplicate address") and with it
// the whole LDS update, so no listener change would reach the proxy.
// Listeners without a socket address (api_listener, internal listeners),
// with bind_to_port false, or on port 0 bind nothing of their own and are
// skipped. group names the group in the message ("" for an ungrouped
// fleet); reported holds the pairs already reported, so that a clash
// present in several groups is said once.
func listenerClashes(s *snapshot.Snapshot, group string, where map[string]*xdstype.Resource, reported map[[2]string]bool) diag.List {
	var problems diag.List
	owner := map[string]string{}
	set := s.Set(xdstype.ListenerURL)
	for _, name := range set.Names() {
		l, ok := set.Get(name).Message.(*listenerv3.Listener)
		if !ok || (l.GetBindToPort() != nil && !l.GetBindToPort().GetValue()) {
			continue
		}
		addrs := []*corev3.SocketAddress{l.GetAddress().GetSocketAddress()}
		for _, a := range l.GetAdditionalAddresses() {
			addrs = append(addrs, a.GetAddress().GetSocketAddress())
		}
		for _, a := range addrs {
			if a == nil || a.GetPortValue() == 0 {
				continue
			}
			key := fmt.Sprintf("%s:%d (%s)", a.GetAddress(), a.GetPortValue(), a.GetProtocol())
			prev, clash := owner[key]
			if !clash {
				owner[key] = name
				continue
			}
			if reported[[2]string{prev, name}] {
				continue
			}
			reported[[2]string{prev, name}] = true
			msg := fmt.Sprintf("%s is also the address of Listener %q (%s)", key, prev, locate(where[prev]))
			if group != "" {
				msg += fmt.Sprintf(" in group %q", group)
			}
			d := diag.Diagnostic{Type: "Listener", Name: name, Field: "address", Message: msg + "; Envoy would reject the listener update"}
			if in := where[name]; in != nil {
				d.File, d.Line = in.File, in.Line
			}
			problems = append(problems, d)
		}
	}
	return problems
}

func locate(in *xdstype.Resource) string {
	switch {
	case in == nil || in.File == "":
		return "an earlier entry"
	case in.Line > 0:
		return fmt.Sprintf("%s:%d", in.File, in.Line)
	}
	return in.File
}
