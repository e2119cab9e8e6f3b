package source

import (
	"context"
	"reflect"
)

// Merge joins the updates of several sources (the config's files and a
// Kubernetes cluster's objects, say) into one config: each update from any
// of ins is sent on with the files of the latest update of every other, in
// the order of ins, the first error among them, and the first revision (a
// Git source's commit: the merged config is that commit's and the others'). Nothing is sent before
// every source has sent once, since a config without one source's part
// would name services that are not there yet. It returns when ctx ends or
// an input closes.
func Merge(ctx context.Context, out chan<- Update, ins ...<-chan Update) error {
	cases := make([]reflect.SelectCase, len(ins)+1)
	cases[0] = reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())}
	for i, in := range ins {
		cases[i+1] = reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(in)}
	}
	latest := make([]*Update, len(ins))
	for {
		i, v, ok := reflect.Select(cases)
		if i == 0 || !ok {
			return nil
		}
		u := v.Interface().(Update)
		latest[i-1] = &u
		merged, ready := join(latest)
		if !ready {
			continue
		}
		merged.AcceptedAt = u.AcceptedAt
		select {
		case out <- merged:
		case <-ctx.Done():
			return nil
		}
	}
}

// join is the latest updates as one; ready is false while one is missing.
func join(latest []*Update) (merged Update, ready bool) {
	for _, u := range latest {
		if u == nil {
			return Update{}, false
		}
		merged.Files = append(merged.Files, u.Files...)
		if merged.Err == nil {
			merged.Err = u.Err
		}
		if merged.Revision == "" {
			merged.Revision = u.Revision
		}
	}
	return merged, true
}
