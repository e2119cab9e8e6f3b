package snapshot

import (
	"fmt"

	"github.com/pylon-xds/pylon/internal/redact"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// keyProblems refuses key material in a resource that is not a Secret: a
// private key inline in a Listener's or a Cluster's TLS context, a gRPC
// service's SSL key or call credentials, a JWKS's private members. Such a
// resource goes to every client of its group, with or without a
// certificate, where only a Secret is withheld from the clients not
// entitled to it. What counts is redact.Inline's rule, the one the dumps
// redact by and render refuses by, so the three cannot disagree. The
// problem names the field and never quotes it.
//
// keys is the build's redact.Finder (what it learns of message types
// serves every resource) and enc the resource's encoding.
func keyProblems(in *xdstype.Resource, keys *redact.Finder, enc []byte) []fieldError {
	if in.Type.URL == xdstype.SecretURL {
		return nil
	}
	var out []fieldError
	for _, f := range keys.Inline(in.Message, enc) {
		out = append(out, fieldError{f.Field, fmt.Sprintf("%s inline in a %s is served to every client of its group, with or without a certificate: %s", f.What, in.Type.Kind, f.Remedy)})
	}
	return out
}
