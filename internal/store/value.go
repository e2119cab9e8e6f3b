package store

import (
	"encoding/binary"
	"time"
)

// A stored value, in both stores: a tag byte, the lease as written (unix
// nanoseconds, big-endian, 0 for none) and the body as the store keeps it
// (sealed or not). Binary, not JSON: a body is not inflated by base64.
const (
	tagBody      = 'b'
	tagTombstone = 'd'
	valueHeader  = 9
)

// Value is a stored value decoded. Body is part of the stored bytes:
// copy it before the store's buffer is reused.
type Value struct {
	Body    []byte
	Expires time.Time
	Deleted bool // a tombstone: the object was deleted at this version
}

// EncodeValue is the stored value of body with its lease (zero: none).
func EncodeValue(body []byte, expires time.Time) []byte {
	v := make([]byte, valueHeader+len(body))
	v[0] = tagBody
	if !expires.IsZero() {
		binary.BigEndian.PutUint64(v[1:], uint64(expires.UnixNano()))
	}
	copy(v[valueHeader:], body)
	return v
}

// Tombstone is the stored value of a deletion, for a store that keeps
// versions.
func Tombstone() []byte { return []byte{tagTombstone, 0, 0, 0, 0, 0, 0, 0, 0} }

// DecodeValue reads a stored value; ok is false for bytes that are not one
// (the caller names the record).
func DecodeValue(v []byte) (val Value, ok bool) {
	if len(v) < valueHeader || v[0] != tagBody && v[0] != tagTombstone {
		return val, false
	}
	if v[0] == tagTombstone {
		return Value{Deleted: true}, true
	}
	val.Body = v[valueHeader:]
	if ns := binary.BigEndian.Uint64(v[1:valueHeader]); ns != 0 {
		val.Expires = time.Unix(0, int64(ns))
	}
	return val, true
}
