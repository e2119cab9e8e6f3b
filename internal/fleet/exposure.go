package fleet

import (
	"fmt"
	"sort"
	"strings"

	"github.com/pylon-xds/pylon/internal/nodegroup"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// Binding says which of a node's claims the server's identity rule
// (--node-identity) binds to the node's verified certificate.
type Binding struct{ ID, Cluster bool }

// Exposure is a warning for the operator: a group whose Secrets, or whose
// rollout, rest on claims no certificate proves.
type Exposure struct {
	Group   string
	Warning string
}

// Exposures lists, for the fleet's rules under the binding b:
//   - groups holding Secrets, among several groups, that declare no
//     identities: a verified node of another group can claim what picks
//     the group (metadata, locality; id and cluster unless bound) and
//     receive its Secrets that no `identities` restrict;
//   - groups with a rollout that declare no identities, under no rule
//     binding node ids: a client reaching the xDS port can claim a node of
//     a stage and halt the rollout with a NACK (with a certificate, under
//     a rule binding only the cluster).
func (f *Fleet) Exposures(b Binding) []Exposure {
	var out []Exposure
	for i, rule := range f.rules {
		if len(rule.Identities) > 0 {
			continue
		}
		if n := f.groups[i].Snapshot.Set(xdstype.SecretURL).Len(); n > 0 && len(f.rules) > 1 {
			if by := unbound(rule, b); by != "" {
				out = append(out, Exposure{Group: rule.Name, Warning: fmt.Sprintf(
					"group %q holds %d Secrets and declares no identities; it is picked by %s, which no certificate proves: a verified node of any group can claim it and receive the Secrets that no `identities` restrict. Declare `identities` on the group, or on each Secret",
					rule.Name, n, by)})
			}
		}
		if rule.Rollout != nil && !b.ID {
			out = append(out, Exposure{Group: rule.Name, Warning: fmt.Sprintf(
				"group %q has a rollout and declares no identities, and no --node-identity binds node ids to certificates: a client that reaches the xDS port can claim a node of a stage and halt the rollout with a NACK. Declare `identities` on the group, or serve with --node-identity naming {id}",
				rule.Name)})
		}
	}
	return out
}

// unbound names what picks the group that the binding does not prove; ""
// when the binding proves all of it.
func unbound(g nodegroup.Group, b Binding) string {
	var fields []string
	m := g.Match
	if m.ID != "" && !b.ID {
		fields = append(fields, "match.id")
	}
	if m.Cluster != "" && !b.Cluster {
		fields = append(fields, "match.cluster")
	}
	keys := make([]string, 0, len(m.Metadata))
	for k := range m.Metadata {
		keys = append(keys, "match.metadata."+k)
	}
	sort.Strings(keys)
	fields = append(fields, keys...)
	for _, l := range []struct{ name, v string }{{"match.region", m.Region}, {"match.zone", m.Zone}, {"match.sub_zone", m.SubZone}} {
		if l.v != "" {
			fields = append(fields, l.name)
		}
	}
	if g.Default {
		// A node leaves every other group by claiming what picks them
		// otherwise.
		fields = append(fields, "being the default group (it takes every node no other group does)")
	}
	return strings.Join(fields, ", ")
}
