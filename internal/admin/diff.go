package admin

import (
	"bytes"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/pylon-xds/pylon/internal/admin/udiff"
	"github.com/pylon-xds/pylon/internal/store"
)

// diffBody is the answer of GET /v1/diff.
type diffBody struct {
	From int64 `json:"from"`
	// To is the revision compared against: the one asked for, or the
	// store's current revision.
	To int64 `json:"to"`
	// Endpoints says whether registered endpoints are part of the diff.
	// They are runtime state, not config: the history has no entry for
	// them, so by default the diff leaves them out too; ?endpoints=true
	// shows them.
	Endpoints bool   `json:"endpoints"`
	Note      string `json:"note"`
	// Diff is a unified diff of the two revisions' objects as YAML, one
	// document per object headed "# kind/name", redacted; empty when they
	// are the same.
	Diff string `json:"diff"`
}

const diffNote = "a unified diff of the stored objects as YAML, redacted; registered endpoints are runtime state and, as in the history, left out unless ?endpoints=true"

// diff answers GET /v1/diff?from=REV[&to=REV][&endpoints=true]: what
// changed in the stored config between two revisions, to defaulting to the
// current one. ?format=diff (or Accept: text/x-diff) answers the bare
// unified diff, for patch tools and pagers.
func (a api) diff(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	from, err := revisionOf("from", q.Get("from"))
	var withEndpoints bool
	if err == nil {
		withEndpoints, err = boolParam(r, "endpoints")
	}
	if err != nil {
		fail(w, err)
		return
	}
	old, err := a.cfg().Store().At(r.Context(), from)
	if err != nil {
		fail(w, err)
		return
	}
	var to int64
	var objs []store.Object
	if v := q.Get("to"); v != "" {
		if to, err = revisionOf("to", v); err == nil {
			var e store.Entry
			e, err = a.cfg().Store().At(r.Context(), to)
			objs = e.Objects
		}
	} else {
		objs, to, err = a.cfg().Store().List(r.Context())
	}
	if err != nil {
		fail(w, err)
		return
	}
	d := udiff.Diff("revision "+strconv.FormatInt(from, 10), render(old.Objects, withEndpoints),
		"revision "+strconv.FormatInt(to, 10), render(objs, withEndpoints))
	if rawDiff(r) {
		w.Header().Set("Content-Type", "text/x-diff; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(d)
		return
	}
	respond(w, r, http.StatusOK, diffBody{From: from, To: to, Endpoints: withEndpoints, Note: diffNote, Diff: string(d)})
}

// rawDiff reports whether the bare diff was asked for.
func rawDiff(r *http.Request) bool {
	if f := r.URL.Query().Get("format"); f != "" {
		return f == "diff"
	}
	return strings.Contains(r.Header.Get("Accept"), "text/x-diff")
}

// render is objects as YAML, one document per object in kind and name
// order, each headed by a "# kind/name" comment so that a hunk says which
// object it is in; bodies redacted as every read is.
func render(objs []store.Object, withEndpoints bool) []byte {
	objs = append([]store.Object(nil), objs...)
	sort.Slice(objs, func(i, j int) bool {
		if objs[i].Kind != objs[j].Kind {
			return objs[i].Kind < objs[j].Kind
		}
		return objs[i].Name < objs[j].Name
	})
	var b bytes.Buffer
	for _, o := range objs {
		if !withEndpoints && strings.HasPrefix(o.Kind, "endpoints.") {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("---\n")
		}
		b.WriteString("# " + header(o.Key) + "\n")
		y, err := yaml.JSONToYAML(view(o).Body)
		if err != nil {
			// view's body is valid JSON; this is the unreachable case,
			// shown rather than hidden.
			y = []byte("# not shown: " + err.Error() + "\n")
		}
		b.Write(y)
	}
	return b.Bytes()
}

// header names an object in its comment line, quoted if the name would
// otherwise break the line (and so forge lines of the diff).
func header(k store.Key) string {
	s := k.Kind + "/" + k.Name
	if strings.ContainsAny(s, "\n\r") {
		return strconv.Quote(s)
	}
	return s
}
