package layers

// The import rules of Pylon's packages, explained in docs/architecture.md.
// Paths are relative to the module's root; "a/..." is a and every package
// under it. One line per rule, so that a change adds or deletes lines:
//   - a new package: a line in layer, and a line in allowed per import;
//   - a new import that the layers permit (to a lower layer): a line in allowed;
//   - an import against the layers: not an allowance; move the code instead,
//     or, only for code that is already so, a line in debts naming the step
//     of issue 31 that removes it. A debt the code has paid fails the test
//     until its line goes.

// The layers, bottom up: a package may import only packages of lower layers,
// and of those only what allowed lists.
const (
	leaf        = iota // imports nothing of Pylon
	base               // small shared vocabularies over the leaves
	content            // the document, the Envoy resources, the snapshots
	fleets             // who gets which snapshot: the fleet and its publisher
	protocol           // the xDS protocol under its server: the pure core, the wire
	engine             // what reads content: sources, route engine, xDS server, rollouts
	build              // compile, and what binds an engine to the outside
	stage              // the reconcile loop and the store-mode source of truth
	surface            // the admin API
	composition        // the daemon
	command            // the command line
	program            // package main
)

var layerNames = []string{"leaf", "base", "content", "fleets", "protocol", "engine", "build", "stage", "surface", "composition", "command", "program"}

var layer = map[string]int{
	"examples":                       leaf,
	"internal/admin/udiff":           leaf,
	"internal/bootstrap":             leaf,
	"internal/certs":                 leaf,
	"internal/certs/certstest":       leaf,
	"internal/cowmap":                leaf,
	"internal/golden":                leaf,
	"internal/grpcrules":             leaf,
	"internal/identity":              leaf,
	"internal/loopback":              leaf,
	"internal/nodegroup":             leaf,
	"internal/redact":                leaf,
	"internal/seal":                  leaf,
	"internal/secretfile":            leaf,
	"internal/store":                 leaf,
	"internal/source/git/gittest":    leaf,
	"internal/ui":                    leaf,
	"internal/xdstype":               leaf,
	"internal/ca":                    base,
	"internal/diag":                  base,
	"internal/identity/identitytest": base,
	"internal/model":                 base,
	"internal/status":                base,
	"internal/store/bolt":            base,
	"internal/store/etcd":            base,
	"internal/store/storetest":       base,
	"internal/token":                 base,
	"internal/xds/guard":             base,
	"internal/relay/upstream":        base,
	"internal/config":                content,
	"internal/fleetstatus":           content,
	"internal/metrics":               content,
	"internal/snapshot":              content,
	"internal/status/statustest":     content,
	"internal/store/etcd/etcdtest":   content,
	"internal/translate":             content,
	"internal/fleet":                 fleets,
	"internal/xds/protocol":          protocol,
	"internal/xds/wire":              protocol,
	"internal/csds":                  engine,
	"internal/render":                engine,
	"internal/rollout":               engine,
	"internal/route":                 engine,
	"internal/source":                engine,
	"internal/xds":                   engine,
	"internal/relay":                 engine,
	"internal/compile":               build,
	"internal/source/file":           build,
	"internal/source/git":            build,
	"internal/source/kube":           build,
	"internal/source/kube/kubetest":  engine,
	"internal/xds/xdstest":           build,
	"internal/xdsrest":               build,
	"internal/configstore":           stage,
	"internal/pipeline":              stage,
	"internal/admin":                 surface,
	"internal/ctl":                   surface,
	"internal/daemon":                composition,
	"internal/cli":                   command,
	"internal/daemon/daemontest":     command,
	"bench/fleet":                    program,
	"bench/scale":                    program,
	"cmd/pylon":                      program,
	"cmd/pylonctl":                   program,
}

// allowed are the imports the layering permits, each from a package to one
// in a lower layer. A line may allow what no code imports yet.
var allowed = []edge{
	{"bench/fleet", "internal/configstore"},
	{"bench/fleet", "internal/cowmap"},
	{"bench/fleet", "internal/daemon"},
	{"bench/fleet", "internal/fleet"},
	{"bench/fleet", "internal/snapshot"},
	{"bench/fleet", "internal/status"},
	{"bench/fleet", "internal/store/bolt"},
	{"bench/fleet", "internal/xds"},
	{"bench/fleet", "internal/xdstype"},
	{"bench/scale", "internal/xdstype"},
	{"cmd/pylon", "internal/cli"},
	{"cmd/pylon", "internal/daemon"},
	{"cmd/pylonctl", "internal/ctl"},
	{"internal/admin", "internal/admin/udiff"},
	{"internal/admin", "internal/configstore"},
	{"internal/admin", "internal/diag"},
	{"internal/admin", "internal/fleet"},
	{"internal/admin", "internal/fleetstatus"},
	{"internal/admin", "internal/nodegroup"}, // GET /v1/groups shows the group rules
	{"internal/admin", "internal/model"},
	{"internal/admin", "internal/pipeline"},
	{"internal/admin", "internal/redact"},
	{"internal/admin", "internal/rollout"},
	{"internal/admin", "internal/snapshot"},
	{"internal/admin", "internal/source"},
	{"internal/admin", "internal/status"},
	{"internal/admin", "internal/store"},
	{"internal/admin", "internal/token"},
	{"internal/admin", "internal/ui"},
	{"internal/admin", "internal/xdstype"},
	{"internal/ca", "internal/certs"}, // the certificates it issues are read and verified as the server does
	{"internal/ca", "internal/identity"},
	{"internal/cli", "internal/bootstrap"},
	{"internal/cli", "internal/ca"},
	{"internal/cli", "internal/certs"},
	{"internal/cli", "internal/compile"},
	{"internal/cli", "internal/config"},
	{"internal/cli", "internal/configstore"},
	{"internal/cli", "internal/ctl"},
	{"internal/cli", "internal/daemon"},
	{"internal/cli", "internal/diag"},
	{"internal/cli", "internal/fleet"},
	{"internal/cli", "internal/grpcrules"}, // validate and explain name each client's rules
	{"internal/cli", "internal/pipeline"},
	{"internal/cli", "internal/redact"},
	{"internal/cli", "internal/relay"},
	{"internal/cli", "internal/relay/upstream"},
	{"internal/cli", "internal/render"},
	{"internal/cli", "internal/rollout"},
	{"internal/cli", "internal/route"},
	{"internal/cli", "internal/snapshot"},
	{"internal/cli", "internal/source"},
	{"internal/cli", "internal/source/file"},
	{"internal/cli", "internal/source/git"}, // serve's Git flags show the source's defaults
	{"internal/cli", "internal/status"},
	{"internal/cli", "internal/store"},
	{"internal/cli", "internal/store/etcd"},
	{"internal/cli", "internal/xdstype"},
	{"internal/compile", "internal/config"},
	{"internal/compile", "internal/diag"},
	{"internal/compile", "internal/fleet"},
	{"internal/compile", "internal/grpcrules"},
	{"internal/compile", "internal/model"},
	{"internal/compile", "internal/nodegroup"},
	{"internal/compile", "internal/route"},
	{"internal/compile", "internal/secretfile"},
	{"internal/compile", "internal/snapshot"},
	{"internal/compile", "internal/translate"},
	{"internal/compile", "internal/xdstype"},
	{"internal/config", "internal/diag"},
	{"internal/config", "internal/model"},
	{"internal/config", "internal/nodegroup"},
	{"internal/config", "internal/xdstype"},
	{"internal/configstore", "internal/compile"},
	{"internal/configstore", "internal/config"},
	{"internal/configstore", "internal/diag"},
	{"internal/configstore", "internal/fleet"},
	{"internal/configstore", "internal/model"},
	{"internal/configstore", "internal/redact"},
	{"internal/configstore", "internal/snapshot"},
	{"internal/configstore", "internal/source"},
	{"internal/configstore", "internal/store"},
	{"internal/configstore", "internal/xdstype"},
	{"internal/csds", "internal/identity"},
	{"internal/csds", "internal/nodegroup"},
	{"internal/csds", "internal/redact"},
	{"internal/csds", "internal/status"},
	{"internal/csds", "internal/token"},
	{"internal/csds", "internal/xdstype"},
	{"internal/ctl", "internal/certs"},
	{"internal/ctl", "internal/diag"},
	{"internal/ctl", "internal/loopback"},
	{"internal/ctl", "internal/redact"},
	{"internal/daemon", "examples"},
	{"internal/daemon", "internal/admin"},
	{"internal/daemon", "internal/certs"},
	{"internal/daemon", "internal/compile"},
	{"internal/daemon", "internal/config"},
	{"internal/daemon", "internal/configstore"},
	{"internal/daemon", "internal/csds"},
	{"internal/daemon", "internal/diag"},
	{"internal/daemon", "internal/fleet"},
	{"internal/daemon", "internal/fleetstatus"},
	{"internal/daemon", "internal/identity"},
	{"internal/daemon", "internal/loopback"},
	{"internal/daemon", "internal/metrics"},
	{"internal/daemon", "internal/pipeline"},
	{"internal/daemon", "internal/relay"},
	{"internal/daemon", "internal/relay/upstream"},
	{"internal/daemon", "internal/rollout"},
	{"internal/daemon", "internal/seal"},
	{"internal/daemon", "internal/secretfile"},
	{"internal/daemon", "internal/snapshot"},
	{"internal/daemon", "internal/source/..."},
	{"internal/daemon", "internal/status"},
	{"internal/daemon", "internal/store/..."},
	{"internal/daemon", "internal/token"},
	{"internal/daemon", "internal/xds"},
	{"internal/daemon", "internal/xds/guard"}, // the reasons a connection ends, named as the server names them
	{"internal/daemon", "internal/xdsrest"},
	{"internal/daemon", "internal/xdstype"},
	{"internal/daemon/daemontest", "internal/daemon"},
	{"internal/diag", "internal/redact"},
	{"internal/fleet", "internal/nodegroup"},
	{"internal/fleet", "internal/snapshot"},
	{"internal/fleet", "internal/xdstype"},
	{"internal/fleetstatus", "internal/nodegroup"},
	{"internal/fleetstatus", "internal/redact"},
	{"internal/fleetstatus", "internal/status"},
	{"internal/fleetstatus", "internal/store"},
	{"internal/fleetstatus", "internal/store/etcd"},
	{"internal/fleetstatus", "internal/xds/guard"}, // the balance decision's input, guard.Load
	{"internal/identity/identitytest", "internal/certs/certstest"},
	{"internal/metrics", "internal/cowmap"},
	{"internal/metrics", "internal/status"},
	{"internal/model", "internal/nodegroup"},
	{"internal/pipeline", "internal/compile"},
	{"internal/pipeline", "internal/config"},
	{"internal/pipeline", "internal/diag"},
	{"internal/pipeline", "internal/fleet"},
	{"internal/pipeline", "internal/redact"},
	{"internal/pipeline", "internal/snapshot"},
	{"internal/pipeline", "internal/source"},
	{"internal/pipeline", "internal/xdstype"},
	{"internal/relay", "internal/diag"},
	{"internal/relay", "internal/fleet"},
	{"internal/relay", "internal/nodegroup"},
	{"internal/relay", "internal/relay/upstream"},
	{"internal/relay", "internal/snapshot"},
	{"internal/relay", "internal/status"},
	{"internal/relay", "internal/xdstype"},
	{"internal/render", "internal/bootstrap"},
	{"internal/render", "internal/redact"},
	{"internal/render", "internal/snapshot"},
	{"internal/render", "internal/xdstype"},
	{"internal/rollout", "internal/config"},
	{"internal/rollout", "internal/redact"}, // a NACK's error in a halt's detail
	{"internal/rollout", "internal/fleet"},
	{"internal/rollout", "internal/nodegroup"},
	{"internal/rollout", "internal/seal"},
	{"internal/rollout", "internal/snapshot"},
	{"internal/rollout", "internal/status"}, // the stream events
	{"internal/rollout", "internal/xdstype"},
	{"internal/route", "internal/grpcrules"}, // explain says what a gRPC client does with what it fetches
	{"internal/route", "internal/snapshot"},
	{"internal/route", "internal/xdstype"},
	{"internal/snapshot", "internal/diag"},
	{"internal/snapshot", "internal/redact"}, // the output gate refuses key material outside a Secret by redact's one rule
	{"internal/snapshot", "internal/xdstype"},
	{"internal/source", "internal/config"},
	{"internal/source/file", "internal/config"},
	{"internal/source/file", "internal/source"},
	{"internal/source/git", "internal/config"},
	{"internal/source/git", "internal/seal"}, // the credentials file is read as every key file is
	{"internal/source/git", "internal/source"},
	{"internal/source/git", "internal/loopback"},
	{"internal/source/kube", "internal/config"},
	{"internal/source/kube", "internal/model"},
	{"internal/source/kube", "internal/redact"},
	{"internal/source/kube", "internal/source"},
	{"internal/source/kube/kubetest", "internal/store/etcd/etcdtest"},
	{"internal/status", "internal/cowmap"},
	{"internal/status", "internal/nodegroup"},
	{"internal/status/statustest", "internal/status"},
	{"internal/store/bolt", "internal/seal"},
	{"internal/store/bolt", "internal/store"},
	{"internal/store/etcd", "internal/seal"},
	{"internal/store/etcd", "internal/store"},
	{"internal/store/etcd/etcdtest", "internal/store/etcd"},
	{"internal/store/storetest", "internal/seal"},
	{"internal/store/storetest", "internal/store"},
	{"internal/token", "internal/seal"}, // a token file is read as a key file is: seal.ReadPrivate
	{"internal/translate", "internal/model"},
	{"internal/translate", "internal/nodegroup"},
	{"internal/xds", "internal/fleet"},
	{"internal/xds", "internal/identity"},
	{"internal/xds", "internal/nodegroup"},
	{"internal/xds", "internal/redact"},
	{"internal/xds", "internal/snapshot"},
	{"internal/xds", "internal/status"}, // the stream events, and a stream's status.Stamps
	{"internal/xds", "internal/xds/guard"},
	{"internal/xds", "internal/xds/protocol"},
	{"internal/xds", "internal/xds/wire"},
	{"internal/xds", "internal/xdstype"},
	{"internal/xds/guard", "internal/certs"}, // a connection's client certificate verified again, as the handshake does
	{"internal/xds/guard", "internal/identity"},
	{"internal/xds/xdstest", "internal/fleet"},
	{"internal/xds/protocol", "internal/snapshot"},
	{"internal/xds/protocol", "internal/xdstype"},
	{"internal/xds/wire", "internal/snapshot"},
	{"internal/xds/xdstest", "internal/snapshot"},
	{"internal/xds/xdstest", "internal/xds"},
	{"internal/xds/xdstest", "internal/xdstype"},
	{"internal/xdsrest", "internal/xds"},
	{"internal/xdsrest", "internal/xdstype"},
}

// debts are the imports today's code has against the layering, each with the
// step of issue 31 that removes it. Add none: a new one is a design to fix.
var debts = []debt{}

// testHelpers are the packages written for tests: only tests and other
// helpers import them, and only they import package testing outside a test.
var testHelpers = []string{
	"internal/certs/certstest",
	"internal/daemon/daemontest",
	"internal/golden",
	"internal/identity/identitytest",
	"internal/source/git/gittest",
	"internal/source/kube/kubetest",
	"internal/status/statustest",
	"internal/store/etcd/etcdtest",
	"internal/store/storetest",
	"internal/xds/xdstest",
}

// testsMayNotImport is the looser rule of _test.go files: a test may import
// any of Pylon's libraries (an end-to-end test needs the daemon, a protocol
// test the scripted client), but no program and no other end-to-end suite.
var testsMayNotImport = []string{"bench/...", "cmd/...", "test/..."}

// owners are modules outside Pylon that only the listed packages import.
var owners = []owner{
	{"github.com/fsnotify/fsnotify/...", []string{"internal/source/file"}, "watching files is the file source's job"},
	{"github.com/go-git/...", []string{"internal/source/git"}, "speaking Git is the Git source's job"},
	{"github.com/prometheus/...", []string{"bench/fleet", "internal/admin", "internal/metrics"}, "metrics live in metrics and are served by admin"},
	{"github.com/spf13/cobra/...", []string{"internal/cli", "internal/ctl"}, "the command line is cli's, and ctl's commands that only talk to the admin API"},
	{"go.etcd.io/bbolt/...", []string{"internal/store/bolt", "internal/store/etcd", "internal/store/etcd/etcdtest"}, "the stores' drivers stay behind the store interface"},
	{"go.etcd.io/etcd/...", []string{"bench/scale", "internal/store/bolt", "internal/store/etcd", "internal/store/etcd/etcdtest"}, "the stores' drivers stay behind the store interface; bench/scale embeds the etcd its replica processes share"},
	{"go.etcd.io/raft/...", []string{"internal/store/etcd", "internal/store/etcd/etcdtest"}, "the stores' drivers stay behind the store interface"},
	{"k8s.io/client-go/...", []string{"deploy", "internal/source/kube", "internal/source/kube/kubetest"}, "talking to a Kubernetes API server is the Kubernetes source's job, and deploy's tests send the shipped manifests to a real one"},
	{"k8s.io/...", []string{"deploy", "internal/source/kube", "internal/source/kube/kubetest"}, "the Kubernetes API types are the Kubernetes source's, and check the shipped manifests in deploy's tests"},
}

// bans are imports a package never makes even where the layers would permit
// them, the rules of docs/architecture.md that a layer cannot say. A debt
// passes a ban until its step removes it; then the ban keeps it out.
var bans = []ban{
	{"internal/ctl", "github.com/envoyproxy/...", "pylonctl starts in milliseconds: ctl links none of the server's libraries"},
	{"internal/ctl", "github.com/prometheus/...", "pylonctl starts in milliseconds: ctl links none of the server's libraries"},
	{"internal/ctl", "go.etcd.io/...", "pylonctl starts in milliseconds: ctl links none of the server's libraries"},
	{"internal/ctl", "google.golang.org/grpc/...", "pylonctl starts in milliseconds: ctl links none of the server's libraries"},
	{"internal/ctl", "k8s.io/...", "pylonctl starts in milliseconds: ctl links none of the server's libraries"},
	{"internal/admin", "internal/xds", "the admin API reads status, not the server"},
	{"internal/csds", "internal/model", "the xDS side never sees the model"},
	{"internal/rollout", "internal/model", "the rollout policy and the node are nodegroup's"},
	{"internal/rollout", "internal/xds", "rollout reads events from status, not the server"},
	{"internal/fleet", "internal/config", "the fleet serves group rules, not the document"},
	{"internal/fleet", "internal/model", "the fleet serves group rules, not the model"},
	{"internal/snapshot", "internal/model", "a snapshot is content; who gets which is the fleet's"},
	{"internal/snapshot", "internal/nodegroup", "a snapshot is content; who gets which is the fleet's"},
	{"internal/xds", "internal/compile", "the xDS server never sees the document"},
	{"internal/xds", "internal/config", "the xDS server never sees the document"},
	{"internal/xds", "internal/model", "the xDS side never sees the model"},
	{"internal/xds", "internal/source/...", "the xDS server never sees the sources"},
	{"internal/xds", "internal/store/...", "the xDS server never sees the store"},
	{"internal/xds", "internal/translate", "the xDS server never sees the model"},
	{"internal/xds/protocol", "google.golang.org/grpc/...", "the protocol core is pure; the stream shell (xds) speaks gRPC"},
	{"internal/xds/protocol", "internal/status", "the protocol core decides; the stream shell reports"},
	{"internal/xds/protocol", "net/...", "the protocol core does no I/O"},
	{"internal/xds/protocol", "os/...", "the protocol core does no I/O"},
	{"internal/model", "github.com/envoyproxy/...", "the model holds no Envoy types"},
	{"internal/model", "google.golang.org/grpc/...", "the model is plain data"},
	{"internal/model", "google.golang.org/protobuf/...", "the model holds no Envoy types"},
	{"internal/model", "net/...", "the model does no I/O"},
	{"internal/model", "os/...", "the model does no I/O"},
	{"internal/nodegroup", "github.com/envoyproxy/...", "node groups are plain values: the fleet converts Envoy's node"},
	{"internal/nodegroup", "google.golang.org/grpc/...", "node groups are plain values"},
	{"internal/nodegroup", "google.golang.org/protobuf/...", "node groups are plain values: the fleet converts Envoy's node"},
	{"internal/nodegroup", "net/...", "node groups do no I/O"},
	{"internal/nodegroup", "os/...", "node groups do no I/O"},
	{"internal/grpcrules", "google.golang.org/grpc/...", "the rules are what gRPC clients accept, read from them, not run"},
	{"internal/grpcrules", "net/...", "the rules do no I/O"},
	{"internal/grpcrules", "os/...", "the rules do no I/O"},
	{"internal/status", "github.com/envoyproxy/...", "status is fed plain event structs"},
	{"internal/status", "internal/model", "status is fed plain event structs; the node they carry is nodegroup's"},
	{"internal/status", "google.golang.org/grpc/...", "status is fed plain event structs"},
	{"internal/translate", "google.golang.org/grpc/...", "translate does no I/O"},
	{"internal/translate", "io/fs", "translate does no I/O"},
	{"internal/translate", "net/...", "translate does no I/O"},
	{"internal/translate", "os/...", "translate does no I/O"},
}

// pylon is Pylon's rules, as TestImportRules checks them.
var pylon = rules{
	layerNames:        layerNames,
	layer:             layer,
	allowed:           allowed,
	debts:             debts,
	testHelpers:       testHelpers,
	testsMayNotImport: testsMayNotImport,
	owners:            owners,
	bans:              bans,
}

// edge is an import: from a package to a package or a pattern.
type edge struct{ from, to string }

// debt is an import against the layering that today's code has.
type debt struct {
	edge
	step string // of issue 31, which removes it
	why  string
}

// owner is a module outside Pylon and the only packages that import it.
type owner struct {
	module string
	pkgs   []string
	why    string
}

// ban is a package, of Pylon's or not, that a package never imports.
type ban struct{ pkg, path, why string }

// rules are the tables a check applies.
type rules struct {
	layerNames        []string
	layer             map[string]int
	allowed           []edge
	debts             []debt
	testHelpers       []string
	testsMayNotImport []string
	owners            []owner
	bans              []ban
}
