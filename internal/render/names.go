package render

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/pylon-xds/pylon/internal/xdstype"
)

const (
	ldsURL  = xdstype.ListenerURL
	cdsURL  = xdstype.ClusterURL
	rdsURL  = xdstype.RouteURL
	edsURL  = xdstype.EndpointURL
	sdsURL  = xdstype.SecretURL
	rtdsURL = xdstype.RuntimeURL
	ecdsURL = xdstype.ExtensionConfURL
)

// The files render writes: one per type for the listeners and clusters
// (the whole set, as a state-of-the-world response carries it), one per
// resource for the types Envoy subscribes to by name, and the bootstrap.
const (
	LDSFile       = "lds.yaml"
	CDSFile       = "cds.yaml"
	BootstrapFile = "bootstrap.yaml"
)

// prefixes are the per-name files' prefixes by type.
var prefixes = map[string]string{rdsURL: "rds-", edsURL: "eds-", sdsURL: "sds-", rtdsURL: "rtds-", ecdsURL: "ecds-"}

// ownName matches the files render writes and so may remove when their
// resource is gone; anything else in the folder is left alone.
var ownName = lazyRegexp(`^(?:(?:rds|eds|sds|rtds|ecds)-.+|lds|cds|bootstrap)\.yaml$`)

// safeName is a resource name kept as it is in a file name: also a valid
// Kubernetes ConfigMap key, so the folder can be shipped as one.
var safeName = lazyRegexp(`^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$`)

// names maps resources to the files that hold them, as Envoy sees them
// (under dir) and as render writes them (the base name).
type names struct {
	dir string
	// byFile detects two names mapped to one file, by the file name
	// lowercased: on a case-insensitive filesystem (macOS, Windows)
	// "eds-Cart.yaml" and "eds-cart.yaml" are one file.
	byFile map[string]string
	err    error
}

// perName is the base name of a per-name file: the resource name when it
// is a safe file name, else its safe characters and a hash of it (an
// xdstp:// name, a name with a slash).
func (n *names) perName(typeURL, name string) string {
	base := name
	if !safeName().MatchString(name) || strings.Contains(name, "..") {
		safe := strings.Map(func(r rune) rune {
			if r < 128 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return r
			}
			return '_'
		}, name)
		if len(safe) > 60 {
			safe = safe[:60]
		}
		sum := sha256.Sum256([]byte(name))
		base = safe + "-" + hex.EncodeToString(sum[:8])
	}
	file := prefixes[typeURL] + base + ".yaml"
	key := typeURL + "\x00" + name
	folded := strings.ToLower(file)
	if prev, ok := n.byFile[folded]; ok && prev != key && n.err == nil {
		n.err = fmt.Errorf("two resources map to the file %s (names differing only in case are one file on a case-insensitive filesystem): rename one", file)
	}
	n.byFile[folded] = key
	return file
}

// source is the config source of a file: its path as Envoy sees it, and
// the folder watched for moves, so that a folder replaced by a symlink
// swap (a Kubernetes ConfigMap volume) reloads too.
func (n *names) source(file string) *corev3.ConfigSource {
	return &corev3.ConfigSource{
		ResourceApiVersion: corev3.ApiVersion_V3,
		ConfigSourceSpecifier: &corev3.ConfigSource_PathConfigSource{PathConfigSource: &corev3.PathConfigSource{
			Path:             path.Join(n.dir, file),
			WatchedDirectory: &corev3.WatchedDirectory{Path: n.dir},
		}},
	}
}
