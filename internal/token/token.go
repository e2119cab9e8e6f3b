// Package token compares bearer tokens and reads the admin tokens from
// their files, following a rotation (Files). It is a leaf both the admin
// API and CSDS import, so the comparison and the rotation are written
// once.
package token

import (
	"crypto/sha256"
	"crypto/subtle"
)

// Equal reports whether presented is the configured token, in constant
// time, lengths included (both are hashed first, so the time taken says
// nothing of how long the configured token is or how much of it matched).
// An empty configured token matches nothing: a server with no token
// configured must not let an empty Authorization header through.
func Equal(presented, configured string) bool {
	if configured == "" {
		return false
	}
	a, b := sha256.Sum256([]byte(presented)), sha256.Sum256([]byte(configured))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}
