package daemon

import (
	"log/slog"
	"path/filepath"

	"github.com/pylon-xds/pylon/internal/compile"
	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/rollout"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// RolloutStateFile is the file in the data directory the rollouts are kept
// in, so that a restart resumes them.
const RolloutStateFile = "rollouts.json"

// newRollouts is the rollout controller between the pipeline and the
// publisher: every fleet the pipeline builds is staged by it (the
// pipeline's Publish stage), and the xDS stream events reach it through
// obs. Its state is kept in the data directory, in both modes: with several
// replicas on etcd each replica drives its own copy of a rollout (the
// stages' members are the same on every replica, being a hash of the node
// id; the timers and halts are each replica's own). A superseded halt
// sends on retry, for the pipeline to apply its last (refused) change
// again.
func newRollouts(o Options, sec *security, reg *xdstype.Registry, pub *fleet.Publisher, obs *Observability, read compile.ReadFile, retry chan<- struct{}, log *slog.Logger) (*rollout.Controller, error) {
	ctrl, err := rollout.New(rollout.Options{
		Publisher: pub,
		StatePath: filepath.Join(o.DataDir, RolloutStateFile),
		Compile: func(files []config.File) (*fleet.Fleet, error) {
			// The previous version's route tests passed when it was
			// served: they are not what a resume decides on. A shard
			// compiles its groups' share of it (a fresh cache: a resume
			// is once a rollout), as the pipeline does of the current
			// config: another group's mistake or missing key is not
			// this shard's to stop on.
			return (&compile.Cache{Groups: o.Replicas.Groups}).CompileSkippingTests(reg, files, read)
		},
		OnStage: obs.Metrics.RolloutStage,
		OnHalt:  obs.Metrics.RolloutHalt,
		OnSupersede: func() {
			select {
			case retry <- struct{}{}:
			default: // one already pending retries the same change
			}
		},
		// Under an identity rule only verified streams count toward a
		// halt: a client without a certificate claims any node.
		Binding: sec.binding(),
		Logger:  log,
		Seal:    o.ring,
	})
	if err != nil {
		return nil, err
	}
	return ctrl, nil
}
