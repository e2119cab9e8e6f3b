package daemon

import (
	"github.com/pylon-xds/pylon/internal/status"
	"github.com/pylon-xds/pylon/internal/xds"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// tracking feeds xDS stream events to the status tracker.
type tracking struct {
	reg *xdstype.Registry
	t   *status.Tracker
}

func (o tracking) Observe(e xds.Event) {
	if e.Kind == xds.StreamClosed {
		o.t.Closed(e.StreamID)
		return
	}
	kind := "ADS"
	if !e.ADS {
		kind = "per-type"
		if t := o.reg.Lookup(e.TypeURL); t != nil {
			kind = t.Abbrev
		}
	}
	if e.Delta {
		kind += " delta"
	}
	group := e.Group
	if e.Kind == xds.NoGroup {
		group = ""
	}
	o.t.Seen(e.StreamID, e.Node.GetId(), e.Node.GetCluster(), kind, group, e.At)
}
