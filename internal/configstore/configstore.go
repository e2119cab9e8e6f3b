// Package configstore is the source of truth in store mode: config objects
// kept in a store, changed through the admin API, validated exactly like a
// config file before anything is stored, and history with rollback.
//
// On a store shared by several replicas (etcd: a store.Watcher with
// CommitSince) each replica's Service watches the store, so every write
// and every lease etcd expires reaches every replica's pipeline; commits
// are validated against one read and stored only if nothing was committed
// since; and while the store cannot be reached the replica keeps serving
// its last good config, refuses writes and registrations with
// store.ErrUnavailable, and says so in Degraded.
package configstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/pylon-xds/pylon/internal/compile"
	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/diag"
	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/redact"
	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/store"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// Model kinds; raw resources are "resources.<Kind>", registered endpoints
// "endpoints.<service>".
// "tests" are route tests: stored like model objects, every write compiled
// with them, so a write that breaks one is refused.
var modelKinds = []string{"services", "routes", "listeners", "secrets", "grpc", "tests"}

// GroupsKey holds the node groups, one list: their order matters.
var GroupsKey = store.Key{Kind: "groups", Name: "groups"}

// Errors, for the API to map to status codes.
var (
	ErrInvalid  = errors.New("invalid")
	ErrConflict = store.ErrConflict
	ErrNotFound = store.ErrNotFound
)

// Options configures a Service.
type Options struct {
	Store    store.Store
	Registry *xdstype.Registry
	Read     compile.ReadFile
	// Keep bounds the history (default 100).
	Keep int
	// Debounce is the least time between two updates of the pipeline:
	// bursts of writes (endpoint registrations) within it are batched
	// into one update; a write after a quiet spell goes out at once
	// (default 100ms).
	Debounce time.Duration
	// Spacing, when set, is the least time between two updates while
	// writes keep coming, when longer than Debounce: the daemon's grows
	// with the proxies each publish reaches (every publish under churn is
	// a response to each of them). Read at each update; bounded by
	// maxPace. The first write after a quiet spell still goes out at once.
	Spacing func() time.Duration
	Logger  *slog.Logger
	Now     func() time.Time
	// Probe is how often a shared store (one that implements
	// store.Watcher: etcd) is checked while nothing else calls it, so
	// that Degraded notices etcd going away, and how often the stored
	// config is read again while it is away, so that this replica
	// catches up as soon as it is back (default 1s).
	Probe time.Duration
	// Gate, if set, refuses a compiled change before it is stored (a
	// change to a group whose rollout is halted): its error is returned
	// as is, and nothing is stored. Dry runs are not gated.
	Gate func(*fleet.Fleet) error
	// Extra, if set, is the files another source adds to the config (a
	// Kubernetes cluster's services): every write is validated with them,
	// as the pipeline will compile it, so that a route may name them.
	Extra func() []config.File
	// Cache, if set, is the compile cache writes are validated through:
	// the daemon passes its pipeline's (pipeline.Pipeline.Cache), so that
	// a write and the publish that follows it share what they decoded,
	// translated and encoded, and the config is kept decoded once rather
	// than twice. Nil: the service keeps its own.
	Cache *compile.Cache
}

// sinceCommitter is a store that commits on the condition that nothing was
// committed after a revision (etcd.Store.CommitSince): replicas validate
// concurrently, and per-object revisions cannot keep two changes that are
// each valid alone from breaking a reference together.
type sinceCommitter interface {
	CommitSince(ctx context.Context, since int64, changes []store.Change, entry *store.Entry, keep int) (int64, error)
}

// leaseExpirer is a store that drops leased objects itself when they run
// out (etcd leases): the service then runs no expiry of its own.
type leaseExpirer interface {
	ExpiresLeases() bool
}

// Service validates and stores config changes and feeds the pipeline.
type Service struct {
	opts   Options
	st     store.Store // opts.Store, every call's outcome observed by health
	health health
	log    *slog.Logger
	mu     sync.Mutex // one writer at a time: validate against what is stored
	writes writeCache // under mu
	notify chan time.Time
	leases leases
	// renewMu orders lease renewals against expiry (see renew):
	// renewals share it (each touches its own endpoint), expiry holds it
	// alone.
	renewMu sync.RWMutex
	// group gathers concurrent registrations into one commit.
	group group
	// written notes the keys written since the runner last read them.
	written written
	// own remembers the services' own endpoints for registrations.
	own ownEndpoints
}

// New returns a service over opts.Store.
func New(opts Options) *Service {
	if opts.Keep <= 0 {
		opts.Keep = 100
	}
	if opts.Debounce <= 0 {
		opts.Debounce = 100 * time.Millisecond
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Read == nil {
		opts.Read = compile.LimitedReader
	}
	if opts.Probe <= 0 {
		opts.Probe = time.Second
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Service{opts: opts, log: log, notify: make(chan time.Time, 1)}
	s.writes.compiled = opts.Cache
	if s.writes.compiled == nil {
		s.writes.compiled = &compile.Cache{}
	}
	s.health = health{log: log, now: opts.Now}
	s.st = observed{Store: opts.Store, h: &s.health, w: &s.written}
	return s
}

// Store returns the store the service writes to, for reads; a read that
// finds it unreachable shows in Degraded.
func (s *Service) Store() store.Store { return s.st }

// Result is what a write did, or with DryRun would do.
type Result struct {
	Revision int64 `json:"revision,omitempty"`
	// Version is the fleet version the config produces.
	Version string `json:"version"`
	// Changes lists, per group, the Envoy resources that change.
	Changes map[string][]string `json:"changes"`
	// Objects lists the stored objects a config write creates ("+
	// kind/name"), changes ("~") and deletes ("-").
	Objects []string `json:"objects,omitempty"`
	DryRun  bool     `json:"dryRun,omitempty"`
	// Unchanged says the write would change no object (an apply of what
	// is stored, the same prune again): nothing was stored, no revision
	// nor history entry made.
	Unchanged bool `json:"unchanged,omitempty"`
	// Recorded says the write made a history entry. Registrations and
	// expiries are runtime state with a revision but no entry: whoever
	// notes a history entry's author (the admin API's "by") notes it
	// only for these, or registrations crowd real entries out.
	Recorded bool `json:"-"`
}

// ValidationError carries the same diagnostics a config file would get.
type ValidationError struct{ Err error }

// Error is redacted: a decoding error may quote the body it refused, and
// the body may hold a private key.
func (e *ValidationError) Error() string   { return redact.String(e.Err.Error()) }
func (e *ValidationError) Unwrap() []error { return []error{ErrInvalid, e.Err} }

// scrubbed is an error whose text is redacted, for errors that leave the
// service as text (the pipeline's update, a log line); errors.Is and As
// still see the cause.
type scrubbed struct{ err error }

func (e scrubbed) Error() string { return redact.String(e.err.Error()) }
func (e scrubbed) Unwrap() error { return e.err }

// scrub wraps err so that its text is redacted.
func scrub(err error) error {
	if err == nil {
		return nil
	}
	return scrubbed{err}
}

// Files renders objects as config files, one per object, named kind/name so
// that a diagnostic names the object; the endpoints registered to a service
// follow it in a file of their own (endpoints/<service>, the config's
// top-level endpoints list), leases past expiry left out.
func Files(objs []store.Object, now time.Time) ([]config.File, error) {
	return (*rendered)(nil).files(objs, now)
}

// rendered remembers the files of the last files call, so that under
// endpoint churn (a thousand services, one changed per write) only what
// changed is rendered again: an object's file while its body is the same,
// a service's endpoints file while its endpoints are, and each endpoint's
// item. The runner owns one; nil renders everything.
type rendered struct {
	objects   map[store.Key]renderedFile
	endpoints map[string]renderedFile                // by service
	items     map[string]map[string]renderedEndpoint // by service and body
}

// renderedEndpoint is an endpoint's item in its service's endpoints file
// and what the item decodes to.
type renderedEndpoint struct {
	item    []byte
	decoded config.Endpoint
}

type renderedFile struct {
	body []byte   // the object's
	eps  [][]byte // the endpoints' bodies
	file config.File
}

// same reports whether f was rendered from body and eps.
func (f renderedFile) same(body []byte, eps [][]byte) bool {
	if !bytes.Equal(f.body, body) || len(f.eps) != len(eps) {
		return false
	}
	for i := range eps {
		if !bytes.Equal(f.eps[i], eps[i]) {
			return false
		}
	}
	return true
}

func (r *rendered) files(objs []store.Object, now time.Time) ([]config.File, error) {
	eps := map[string][][]byte{}
	for _, o := range objs {
		if svc, ok := strings.CutPrefix(o.Kind, "endpoints."); ok && (o.Expires.IsZero() || o.Expires.After(now)) {
			l, ok := eps[svc]
			if !ok && r != nil {
				// Sized as last time: a busy service's list is long.
				l = make([][]byte, 0, len(r.endpoints[svc].eps)+16)
			}
			eps[svc] = append(l, o.Body)
		}
	}
	// The runner reads them in this order already: checked, not sorted
	// (which would also write to the runner's copy).
	if !slices.IsSortedFunc(objs, byKey) {
		slices.SortFunc(objs, byKey)
	}
	next := &rendered{objects: map[store.Key]renderedFile{}, endpoints: map[string]renderedFile{}, items: map[string]map[string]renderedEndpoint{}}
	var files []config.File
	for _, o := range objs {
		if strings.HasPrefix(o.Kind, "endpoints.") {
			continue
		}
		f, err := r.object(o, next)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
		if o.Kind == "services" && len(eps[o.Name]) > 0 {
			f, err := r.endpointsFile(o.Name, eps[o.Name], next)
			if err != nil {
				return nil, err
			}
			files = append(files, f)
		}
	}
	if r != nil {
		*r = *next
	}
	if len(files) == 0 {
		files = []config.File{{Path: "store", Data: []byte(`{"resources": []}`)}}
	}
	return files, nil
}

// object is o's file, kept in next.
func (r *rendered) object(o store.Object, next *rendered) (config.File, error) {
	if r != nil {
		if prev, ok := r.objects[o.Key]; ok && prev.same(o.Body, nil) {
			next.objects[o.Key] = prev
			return prev.file, nil
		}
	}
	var doc map[string]any
	switch {
	case o.Key == GroupsKey:
		var groups []any
		if err := json.Unmarshal(o.Body, &groups); err != nil {
			return config.File{}, err
		}
		doc = map[string]any{"groups": groups}
	case strings.HasPrefix(o.Kind, "resources."):
		doc = map[string]any{"resources": []json.RawMessage{o.Body}}
	default:
		doc = map[string]any{o.Kind: []json.RawMessage{o.Body}}
	}
	data, err := json.Marshal(doc)
	f := config.File{Path: o.Kind + "/" + o.Name, Data: data}
	next.objects[o.Key] = renderedFile{body: o.Body, file: f}
	return f, err
}

// endpointsFile is the file of the endpoints registered to service, kept
// in next: {"endpoints": [{"service": ..., "address": ..., ...}, ...]},
// one item a line, with the items decoded beside it (config.File's
// Endpoints): the item is the encoding of that very value, so loading
// need not parse the thousands of items of a busy service again.
func (r *rendered) endpointsFile(service string, eps [][]byte, next *rendered) (config.File, error) {
	var items map[string]renderedEndpoint
	var data bytes.Buffer
	if r != nil {
		items = r.items[service]
		prev, ok := r.endpoints[service]
		if ok && prev.same(nil, eps) {
			next.endpoints[service], next.items[service] = prev, items
			return prev.file, nil
		}
		data.Grow(len(prev.file.Data) + len(prev.file.Data)/8)
	}
	// The last rendering's items are kept and added to (an item is its
	// body's whatever else changed); those of endpoints gone are dropped
	// once they are a fair share.
	if items == nil || len(items) > len(eps)+len(eps)/4+16 {
		old := items
		items = make(map[string]renderedEndpoint, len(eps))
		for _, b := range eps {
			if it, ok := old[string(b)]; ok {
				items[string(b)] = it
			}
		}
	}
	path := "endpoints/" + service
	decoded := make([]config.Endpoint, len(eps))
	data.WriteString(`{"endpoints": [`)
	for i, b := range eps {
		it, ok := items[string(b)]
		if !ok {
			var e config.Endpoint
			if err := json.Unmarshal(b, &e.Endpoint); err != nil {
				return config.File{}, fmt.Errorf("endpoint of service %s: %w", service, err)
			}
			e.Service = service
			item, err := json.Marshal(e)
			if err != nil {
				return config.File{}, err
			}
			it = renderedEndpoint{item: item, decoded: e}
			items[string(b)] = it
		}
		decoded[i] = it.decoded
		decoded[i].File, decoded[i].Line = path, i+1
		if i > 0 {
			data.WriteString(",\n")
		}
		data.Write(it.item)
	}
	data.WriteString("]}")
	f := config.File{Path: path, Data: data.Bytes(), Endpoints: decoded}
	next.endpoints[service], next.items[service] = renderedFile{eps: eps, file: f}, items
	return f, nil
}

// writeCache is what one write's compile leaves for the next, as the
// pipeline keeps one for its updates: a write changes one object of a
// thousand, and the objects rendered, decoded, translated and encoded for
// the last write are those of this one but for the change. Results are
// those of a compile without it (compile.Cache). Guarded by Service.mu
// (compiled may be shared with the pipeline: compile.Cache is safe for
// concurrent compiles).
type writeCache struct {
	rendered rendered
	compiled *compile.Cache
}

// compileObjects validates a would-be object set. The caller holds s.mu.
func (s *Service) compileObjects(objs []store.Object) (*fleet.Fleet, error) {
	files, err := s.writes.rendered.files(objs, s.opts.Now())
	if err != nil {
		return nil, err
	}
	if s.opts.Extra != nil {
		files = append(files, s.opts.Extra()...)
	}
	fleet, err := s.writes.compiled.Compile(s.opts.Registry, files, s.opts.Read)
	return fleet, unlined(err)
}

// unlined drops the line from diagnostics about stored objects: each is
// compiled from its body rendered on one line, a file no one wrote, so
// its kind/name is the place (an endpoints file's line is its item's
// position, and stays).
func unlined(err error) error {
	var list diag.List
	if !errors.As(err, &list) || errors.Unwrap(err) != nil {
		return err
	}
	out := make(diag.List, len(list))
	for i, d := range list {
		if !strings.HasPrefix(d.File, "endpoints/") {
			d.Line = 0
		}
		out[i] = d
	}
	return out
}

// Current returns the stored objects as config files, for the pipeline.
func (s *Service) Current(ctx context.Context) ([]config.File, error) {
	objs, _, err := s.st.List(ctx)
	if err != nil {
		return nil, scrub(err)
	}
	files, err := Files(objs, s.opts.Now())
	return files, scrub(err)
}

// Commit validates changes against what is stored and, unless dryRun,
// stores them at a new revision with summary in the history. An invalid
// result stores nothing, and so does one that changes nothing (Unchanged).
func (s *Service) Commit(ctx context.Context, changes []store.Change, summary string, dryRun bool) (Result, error) {
	return s.commit(ctx, func([]store.Object) []store.Change { return changes }, summary, dryRun)
}

// maxRevalidations bounds how often a commit is validated again because
// another replica committed between this one's read and its write.
// Between attempts a commit waits a random while, up to maxRevalidateWait
// and growing from revalidateWait: two replicas writing back to back
// otherwise validate in lockstep and keep outpacing each other (seen: 409s
// for writes that asked for no revision, a few per hundred, with two
// writers). Worst case about a second before the 409. A writer that
// never pauses (it always wins) can still starve another now and then;
// only a lock shared by every writer would close that.
const (
	maxRevalidations  = 10
	revalidateWait    = 5 * time.Millisecond
	maxRevalidateWait = 250 * time.Millisecond
)

// stale is a commit refused because the store changed after the read it
// was validated against: validate again on a fresh read.
type stale struct{ err error }

func (e stale) Error() string { return e.err.Error() }
func (e stale) Unwrap() error { return e.err }

// commit validates the changes plan makes to the stored objects and
// commits them, on a shared store only if nothing was committed since the
// read they were validated against; otherwise it reads, plans and
// validates again, a bounded number of times. A change that names a
// revision the object no longer has is a conflict at once (409): the
// caller decides, not a retry.
func (s *Service) commit(ctx context.Context, plan func([]store.Object) []store.Change, summary string, dryRun bool) (Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for attempt := 1; ; attempt++ {
		res, err := s.commitOnce(ctx, plan, summary, dryRun)
		var st stale
		if !errors.As(err, &st) {
			return res, err
		}
		if attempt == maxRevalidations {
			return Result{}, fmt.Errorf("%w (validated %d times: other replicas kept committing meanwhile; retry)", st.err, attempt)
		}
		s.log.Debug("the store changed while a commit was validated; validating again", "attempt", attempt, "err", scrub(st.err))
		if err := pause(ctx, attempt); err != nil {
			return Result{}, err
		}
	}
}

// pause waits a random while before attempt+1, longer the more attempts
// were outpaced (full jitter), or until ctx ends.
func pause(ctx context.Context, attempt int) error {
	limit := min(revalidateWait<<attempt, maxRevalidateWait)
	t := time.NewTimer(rand.N(limit))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// commitOnce reads, validates and commits once.
func (s *Service) commitOnce(ctx context.Context, plan func([]store.Object) []store.Change, summary string, dryRun bool) (Result, error) {
	objs, readRev, err := s.st.List(ctx)
	if err != nil {
		return Result{}, err
	}
	sc, shared := s.opts.Store.(sinceCommitter)
	if shared && readRev == 0 && !dryRun {
		// CommitSince(0) sets no condition, so a commit validated on a
		// store no one has written yet would go unguarded: two replicas'
		// first commits, each valid alone (two listeners on one port),
		// could both land. Move the store off revision 0 with an empty
		// commit (once in its life), then read and validate again.
		_, err := sc.CommitSince(ctx, 0, nil, nil, 0)
		s.health.observe(err)
		if err != nil {
			return Result{}, err
		}
		return Result{}, stale{fmt.Errorf("%w: the store was new", store.ErrConflict)}
	}
	changes := withRegistrations(objs, plan(objs))
	next, err := apply(objs, changes)
	if err != nil {
		return Result{}, err
	}
	fleet, err := s.compileObjects(next)
	if err != nil {
		return Result{}, &ValidationError{Err: err}
	}
	res := Result{Version: fleet.Version(), DryRun: dryRun, Objects: objectLines(objs, changes)}
	if dryRun {
		res.Unchanged = unchanged(objs, changes)
		// What would change is worth a second compile only when asked:
		// the write path (endpoint registrations) stays one compile.
		if before, err := s.compileObjects(objs); err == nil {
			res.Changes = Diff(before, fleet)
		}
		return res, nil
	}
	if unchanged(objs, changes) {
		res.Unchanged = true
		return res, nil
	}
	if s.opts.Gate != nil {
		if err := s.opts.Gate(fleet); err != nil {
			return Result{}, err
		}
	}
	entry := &store.Entry{At: s.opts.Now(), Summary: summary, Version: fleet.Version()}
	var rev int64
	if shared {
		rev, err = sc.CommitSince(ctx, readRev, changes, entry, s.opts.Keep)
		s.health.observe(err)
		s.written.mark(changes)
		if errors.Is(err, store.ErrConflict) {
			return Result{}, stale{err}
		}
	} else {
		rev, err = s.st.Commit(ctx, changes, entry, s.opts.Keep)
	}
	if err != nil {
		return Result{}, err
	}
	res.Revision, res.Recorded = rev, true
	s.log.Info("config stored", "revision", rev, "summary", summary, "version", fleet.Version())
	s.changed()
	return res, nil
}

// apply returns objs with changes made, checking revisions as the store
// will (so a dry run reports conflicts too).
func apply(objs []store.Object, changes []store.Change) ([]store.Object, error) {
	byKey := map[store.Key]store.Object{}
	for _, o := range objs {
		byKey[o.Key] = o
	}
	for _, c := range changes {
		cur, exists := byKey[c.Key]
		if c.Revision == -1 && exists || c.Revision > 0 && (!exists || cur.Revision != c.Revision) {
			return nil, fmt.Errorf("%w: %s/%s is at revision %d", store.ErrConflict, c.Kind, c.Name, cur.Revision)
		}
		if c.Body == nil {
			if !exists && c.Revision >= 0 {
				return nil, fmt.Errorf("%s/%s: %w", c.Kind, c.Name, store.ErrNotFound)
			}
			delete(byKey, c.Key)
			continue
		}
		byKey[c.Key] = store.Object{Key: c.Key, Body: c.Body, Expires: c.Expires}
	}
	out := make([]store.Object, 0, len(byKey))
	for _, o := range byKey {
		out = append(out, o)
	}
	return out, nil
}

// Diff lists, per group, the resources whose versions differ between two
// fleets: "+Cluster/web", "~Listener/http", "-Route/old".
func Diff(a, b *fleet.Fleet) map[string][]string {
	out := map[string][]string{}
	old := map[string]*snapshot.Snapshot{}
	for _, g := range a.Groups() {
		old[g.Name] = g.Snapshot
	}
	for _, g := range b.Groups() {
		var lines []string
		prev := old[g.Name]
		for _, set := range g.Snapshot.Sets() {
			oset := prev.Set(set.Type().URL)
			for _, n := range set.Names() {
				switch o := oset.Get(n); {
				case o == nil:
					lines = append(lines, "+"+set.Type().Kind+"/"+n)
				case o.Version != set.Get(n).Version:
					lines = append(lines, "~"+set.Type().Kind+"/"+n)
				}
			}
			for _, n := range oset.Names() {
				if set.Get(n) == nil {
					lines = append(lines, "-"+set.Type().Kind+"/"+n)
				}
			}
		}
		if len(lines) > 0 {
			out[g.Name] = lines
		}
	}
	return out
}

// Objects splits a config document (YAML or JSON, the file schema) into
// store objects, for apply and for seeding. An object named twice in one
// document is refused, naming both places: which one should win is the
// author's call, not the order a map is read in.
func Objects(reg *xdstype.Registry, data []byte) ([]store.Change, error) {
	d, err := ReadDocument(reg, data)
	return d.Changes, err
}

// Document is a config document split into store objects, with the store
// kinds it names.
type Document struct {
	Changes []store.Change
	// Kinds are the kinds the document names, sorted: each top-level
	// key of the model (services, routes, ...: named even by an empty
	// list), groups, and resources.KIND for each @type under resources.
	// A prune makes the document the whole config of these kinds.
	Kinds []string
	// data and lines place diagnostics back in the document (Place):
	// each object's line in it.
	data  []byte
	lines map[store.Key]int
}

// ReadDocument is Objects with the kinds the document names.
func ReadDocument(reg *xdstype.Registry, data []byte) (Document, error) {
	doc, root, err := document(data)
	if err != nil {
		return Document{}, err
	}
	var out []store.Change
	named := map[string]bool{}
	seen := map[store.Key]string{}
	lines := map[store.Key]int{}
	put := func(kind, name, at string, v any) error {
		if name == "" {
			return &ValidationError{Err: fmt.Errorf("%s: an entry without a name", at)}
		}
		k := store.Key{Kind: kind, Name: name}
		if first, dup := seen[k]; dup {
			return &ValidationError{Err: diag.List{{File: "apply", Line: itemLine(root, at), Type: kind, Name: name, Field: at, Message: "a second object of this kind and name (the first is " + first + "): each object appears once in a document"}}}
		}
		seen[k], lines[k] = at, itemLine(root, at)
		named[kind] = true
		b, err := json.Marshal(v)
		if err != nil {
			return &ValidationError{Err: fmt.Errorf("%s: %w", at, err)}
		}
		out = append(out, store.Change{Key: k, Body: b})
		return nil
	}
	keys := make([]string, 0, len(doc))
	for k := range doc {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		if contains(modelKinds, key) {
			named[key] = true
		}
		if err := splitKey(reg, key, doc[key], put); err != nil {
			return Document{}, err
		}
	}
	if len(out) == 0 {
		// An empty body is more likely a mistake (a file not yet written,
		// the wrong one) than a change; kubectl refuses it alike. For a
		// prune it would delete every object of the kinds it names.
		return Document{}, &ValidationError{Err: errors.New("no objects passed to apply: the document is empty, only comments, or lists no object")}
	}
	kinds := make([]string, 0, len(named))
	for k := range named {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	return Document{Changes: out, Kinds: kinds, data: data, lines: lines}, nil
}

// document reads a config document's top level, its version checked as a
// file's is (config.VersionProblem), naming the line.
func document(data []byte) (map[string]any, *yaml.Node, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, nil, &ValidationError{Err: fmt.Errorf("invalid YAML: %w", err)}
	}
	var doc map[string]any
	if err := root.Decode(&doc); err != nil {
		return nil, nil, &ValidationError{Err: fmt.Errorf("invalid YAML: %w", err)}
	}
	if len(root.Content) == 0 || root.Content[0].Kind != yaml.MappingNode {
		return doc, nil, nil
	}
	m := root.Content[0].Content
	for i := 0; i+1 < len(m); i += 2 {
		if m[i].Value != "version" {
			continue
		}
		if msg := config.VersionProblem(m[i+1]); msg != "" {
			return nil, nil, &ValidationError{Err: diag.List{{File: "apply", Line: m[i+1].Line, Field: "version", Message: msg}}}
		}
	}
	return doc, root.Content[0], nil
}

// itemLine is the line of the document's entry at ("services[2]",
// "groups"), 0 if not found.
func itemLine(top *yaml.Node, at string) int {
	key, index, listed := strings.Cut(strings.TrimSuffix(at, "]"), "[")
	if top == nil {
		return 0
	}
	for i := 0; i+1 < len(top.Content); i += 2 {
		if top.Content[i].Value != key {
			continue
		}
		v := top.Content[i+1]
		n, err := strconv.Atoi(index)
		switch {
		case !listed:
			return top.Content[i].Line
		case err == nil && v.Kind == yaml.SequenceNode && n >= 0 && n < len(v.Content):
			return v.Content[n].Line
		}
	}
	return 0
}

// splitKey puts the objects of one top-level key of a document.
func splitKey(reg *xdstype.Registry, key string, val any, put func(kind, name, at string, v any) error) error {
	list, _ := val.([]any)
	switch {
	case key == "version":
	case key == "groups":
		return put(GroupsKey.Kind, GroupsKey.Name, "groups", val)
	case key == "resources":
		for i, item := range list {
			at := fmt.Sprintf("resources[%d]", i)
			m, _ := item.(map[string]any)
			url, _ := m["@type"].(string)
			t := reg.Lookup(url)
			if t == nil {
				return &ValidationError{Err: fmt.Errorf("%s: unknown @type %q", at, url)}
			}
			if err := put("resources."+t.Kind, resourceName(t, m), at, m); err != nil {
				return err
			}
		}
	case contains(modelKinds, key):
		for i, item := range list {
			m, _ := item.(map[string]any)
			if err := put(key, modelName(key, m), fmt.Sprintf("%s[%d]", key, i), m); err != nil {
				return err
			}
		}
	case key == "endpoints":
		return &ValidationError{Err: fmt.Errorf("endpoints: register them one at a time (POST /v1/services/NAME/endpoints, or pylon endpoints add); apply takes the services they join")}
	default:
		return &ValidationError{Err: fmt.Errorf("unknown top-level key %q", key)}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
