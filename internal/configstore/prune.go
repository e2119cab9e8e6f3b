package configstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/diag"
	"github.com/pylon-xds/pylon/internal/store"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// Prune writes doc's objects and deletes every stored object of the kinds
// doc names that doc does not have, in one commit: one revision, validated
// as a whole, so the order of the deletions cannot leave a reference
// dangling in between (the result lists them referrers first). Registered
// endpoints are runtime state, never a document's: a prune leaves them,
// but for those of a service it deletes, which go with it (as with a
// plain delete: withRegistrations).
// The deletions are worked out again from each read a commit validates,
// so an object created through another replica meanwhile goes too.
func (s *Service) Prune(ctx context.Context, doc Document, summary string, dryRun bool) (Result, error) {
	if len(doc.Changes) == 0 {
		return Result{}, &ValidationError{Err: fmt.Errorf("no objects passed to apply: a prune of an empty document would delete every object of its kinds")}
	}
	plan := func(objs []store.Object) []store.Change { return pruneChanges(s.opts.Registry, doc, objs) }
	return s.commit(ctx, plan, summary, dryRun)
}

// pruneChanges are doc's changes to what is stored (an object stored as
// the document has it is left alone: on etcd the whole prune is one
// transaction, of at most --max-txn-ops operations, so a document that is
// the whole config costs only what it changes), then the deletions of the
// objects of doc's kinds that doc lacks, in deletion order.
func pruneChanges(reg *xdstype.Registry, doc Document, objs []store.Object) []store.Change {
	stored := make(map[store.Key][]byte, len(objs))
	for _, o := range objs {
		if o.Expires.IsZero() {
			stored[o.Key] = o.Body
		}
	}
	keep := map[store.Key]bool{}
	var changes []store.Change
	for _, c := range doc.Changes {
		keep[c.Key] = true
		if b, ok := stored[c.Key]; !ok || !sameBody(b, c.Body) {
			changes = append(changes, c)
		}
	}
	var gone []store.Change
	for _, o := range objs {
		if slices.Contains(doc.Kinds, o.Kind) && !keep[o.Key] && !strings.HasPrefix(o.Kind, "endpoints.") {
			gone = append(gone, store.Change{Key: o.Key})
		}
	}
	slices.SortFunc(gone, func(a, b store.Change) int {
		if x, y := deleteRank(reg, a.Kind), deleteRank(reg, b.Kind); x != y {
			return x - y
		}
		return compareKeys(a.Key, b.Key)
	})
	return append(changes, gone...)
}

// deleteRank orders deletions referrers first, as one would delete by
// hand: route tests, then the model's listeners, gRPC services and routes
// before the services and secrets they name, groups, then raw resources
// in reverse make-before-break order (Listeners first, Secrets last).
func deleteRank(reg *xdstype.Registry, kind string) int {
	if i := slices.Index([]string{"tests", "listeners", "grpc", "routes", "services", "secrets", "groups"}, kind); i >= 0 {
		return i
	}
	ranked := reg.Ranked()
	for i, t := range ranked {
		if kind == "resources."+t.Kind {
			return 100 + len(ranked) - i
		}
	}
	return 1000
}

// objectLines says what changes do to objs, per object: "+ kind/name"
// created, "~ kind/name" changed, "- kind/name" deleted (a write of the
// same body is left out), in the changes' order.
func objectLines(objs []store.Object, changes []store.Change) []string {
	byKey := make(map[store.Key][]byte, len(changes))
	for _, c := range changes {
		byKey[c.Key] = nil
	}
	have := map[store.Key]bool{}
	for _, o := range objs {
		if _, ok := byKey[o.Key]; ok {
			byKey[o.Key], have[o.Key] = o.Body, true
		}
	}
	var out []string
	for _, c := range changes {
		name := c.Kind + "/" + c.Name
		switch {
		case c.Body == nil && have[c.Key]:
			out = append(out, "- "+name)
		case c.Body == nil:
		case !have[c.Key]:
			out = append(out, "+ "+name)
		case !sameBody(byKey[c.Key], c.Body):
			out = append(out, "~ "+name)
		}
	}
	return out
}

// unchanged reports whether changes leave objs as they are: every write
// is of an object stored with the same body and lease, every deletion of
// one not stored. Such a commit stores nothing: a revision and a history
// entry that change nothing would push real rollback points out of the
// bounded history (a GitOps loop applying the same document).
func unchanged(objs []store.Object, changes []store.Change) bool {
	stored := make(map[store.Key]store.Object, len(objs))
	for _, o := range objs {
		stored[o.Key] = o
	}
	for _, c := range changes {
		o, ok := stored[c.Key]
		switch {
		case c.Body == nil && ok:
			return false
		case c.Body == nil:
		case !ok || !o.Expires.Equal(c.Expires) || !sameBody(o.Body, c.Body):
			return false
		}
	}
	return true
}

// sameBody reports whether two stored bodies say the same: equal bytes,
// or the same JSON value written with other spacing or key order (a
// document's object marshalled from YAML against one written by PUT).
// Numbers compare as written, so 80 and 80.0 differ: a difference the
// decoder might see is a change.
func sameBody(a, b []byte) bool {
	if bytes.Equal(a, b) {
		return true
	}
	va, erra := decodeNumbers(a)
	vb, errb := decodeNumbers(b)
	return erra == nil && errb == nil && reflect.DeepEqual(va, vb)
}

func decodeNumbers(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("something follows the value")
	}
	return v, nil
}

// Place names file (the document's, as the client sent it) in the
// diagnostics of a refused write of d: one about an object of the document
// (stored objects are compiled as files named kind/name) gets the line of
// its field in the document, and one about the document itself ("apply")
// its name. Without a file, or for another error, err is returned as it
// is: objects are named kind/name.
func (d Document) Place(err error, file string) error {
	var list diag.List
	if file == "" || !errors.Is(err, ErrInvalid) || !errors.As(err, &list) {
		return err
	}
	out := make(diag.List, len(list))
	fields := config.NewFieldLines(d.data)
	for i, p := range list {
		out[i] = p
		if p.File == "apply" {
			out[i].File = file
			continue
		}
		kind, name, _ := strings.Cut(p.File, "/")
		line, ok := d.lines[store.Key{Kind: kind, Name: name}]
		if !ok || line == 0 {
			continue
		}
		out[i].File, out[i].Line = file, line
		if p.Field != "" {
			out[i].Line = fields.Line(line, p.Field)
		}
	}
	return &ValidationError{Err: out}
}
