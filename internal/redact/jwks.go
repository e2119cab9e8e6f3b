package redact

import (
	"bytes"
	"encoding/json"
)

// jwkPrivate are the members of a JSON Web Key that are secret (RFC 7518
// section 6): an RSA key's private exponent and CRT values (d, p, q, dp,
// dq, qi, oth), an EC or OKP key's d, and a symmetric key's k. The others
// (kty, kid, n, e, x, y, crv, alg, use) are public.
var jwkPrivate = map[string]bool{"d": true, "p": true, "q": true, "dp": true, "dq": true, "qi": true, "oth": true, "k": true}

// redactJWKS returns a JWKS (or a single JWK) with the private members of
// every key replaced by Redacted, and whether it had any. Text that is not
// JSON comes back as it is: local_jwks also takes PEM public keys (a PEM
// private key is found as PEM by String).
func redactJWKS(b []byte) ([]byte, bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return b, false
	}
	if !redactJWK(v) {
		return b, false
	}
	out, err := json.Marshal(v)
	if err != nil {
		return []byte(Redacted), true
	}
	return out, true
}

// redactJWK replaces private members of every key (an object with a kty)
// in v, in place, and says whether there were any.
func redactJWK(v any) bool {
	found := false
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			found = redactJWK(e) || found
		}
	case map[string]any:
		_, isKey := x["kty"]
		for k, e := range x {
			if isKey && jwkPrivate[k] {
				x[k] = Redacted
				found = true
				continue
			}
			found = redactJWK(e) || found
		}
	}
	return found
}
