package admin

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	rolloutctl "github.com/pylon-xds/pylon/internal/rollout"
)

// Rollouts drives the staged rollouts (rolloutctl.Controller).
type Rollouts interface {
	Status() []rolloutctl.Status
	Promote(group string) (rolloutctl.Status, error)
	Halt(group string) (rolloutctl.Status, error)
	Resume(group string) (rolloutctl.Status, error)
	Supersede(group string) (rolloutctl.Status, error)
	Halted() []rolloutctl.Status
	SupersedeAll() []string
	Unsupersede(groups []string)
}

// rolloutsBody is GET /v1/rollouts.
type rolloutsBody struct {
	Rollouts []rolloutctl.Status `json:"rollouts"`
}

// registerRollouts adds GET /v1/rollouts and POST
// /v1/rollouts/{group}/{promote|halt|resume|supersede}. They serve in both
// modes: a rollout is the served config's, whichever its source. Actions
// need the write token and are audited.
func registerRollouts(mux *http.ServeMux, g guard, who *authors) {
	rs := g.o.Rollouts
	if rs == nil {
		return
	}
	mux.HandleFunc("GET /v1/rollouts", g.read(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, rolloutsBody{Rollouts: rs.Status()})
	}))
	actions := map[string]func(string) (rolloutctl.Status, error){
		"promote": rs.Promote, "halt": rs.Halt, "resume": rs.Resume, "supersede": rs.Supersede,
	}
	mux.HandleFunc("POST /v1/rollouts/{group}/{action}", g.write(audited(g.o.logger(), who, func(w http.ResponseWriter, r *http.Request) {
		group, action := r.PathValue("group"), r.PathValue("action")
		act, ok := actions[action]
		if !ok || len(group) > maxKey {
			writeJSON(w, http.StatusNotFound, apiError{Error: fmt.Sprintf("unknown rollout action %q: promote, halt, resume or supersede", truncate(action))})
			return
		}
		noteChanges(r, "rollout "+action+" "+group)
		s, err := act(group)
		switch {
		case errors.Is(err, rolloutctl.ErrNoRollout):
			writeJSON(w, http.StatusNotFound, apiError{Error: err.Error()})
		case err != nil:
			writeJSON(w, http.StatusConflict, apiError{Error: err.Error()})
		default:
			writeJSON(w, http.StatusOK, s)
		}
	})))
}

// haltedGate marks the halted rollouts superseded when a config write says
// ?supersede=true: the change then replaces them. Without it a write that
// changes a halted rollout's group is refused once compiled, with 409
// (rollout.ErrHalted, from the store's gate), and a write to any other
// group goes through. Dry runs supersede nothing. superseded names the
// groups marked, for supersedeFailed.
func (a api) haltedGate(r *http.Request) (superseded []string) {
	rs := a.o.Rollouts
	if rs == nil {
		return nil
	}
	if dry, _ := boolParam(r, "dryRun"); dry {
		return nil
	}
	if sup, err := boolParam(r, "supersede"); err != nil || !sup || len(rs.Halted()) == 0 {
		return nil
	}
	superseded = rs.SupersedeAll()
	a.o.logger().Warn("a config write supersedes halted rollouts", "groups", strings.Join(superseded, ","))
	return superseded
}

// supersedeFailed takes back the supersede marks of a write that stored
// no config change (refused, failed, or one that changed nothing): the
// rollouts it would have superseded stay halted, and the next change is
// refused as before. The marks stay only for a write that made a history
// entry: that change must go through. A write whose outcome the store
// could not tell (etcd gone mid-commit) takes them back too: better an
// operator supersedes again (pylon rollout supersede) than the next
// writer's change replaces a halted rollout unasked. A mark the change
// already used (its fleet published) is not taken back.
func (a api) supersedeFailed(groups []string, recorded bool, code int) {
	if len(groups) == 0 || recorded {
		return
	}
	a.o.Rollouts.Unsupersede(groups)
	a.o.logger().Warn("the superseding config write stored nothing: the rollouts stay halted", "groups", strings.Join(groups, ","), "status", code)
}
