package config

import (
	"crypto/sha256"
	"encoding/binary"
	"hash"
)

// Digest is the SHA-256 of files: each one's path, folder, whether its
// source bounds it, and contents, length-prefixed. (File.Endpoints is
// what Data decodes to: Data stands for it.) Two lists digest alike only
// when they load alike: what the pipeline compares a re-read with, and
// what a rollout's saved config is known by.
func Digest(files []File) [sha256.Size]byte {
	h := sha256.New()
	field := func(h hash.Hash, b []byte) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	for _, f := range files {
		field(h, []byte(f.Path))
		field(h, []byte(f.Dir))
		if f.SourceBounded {
			field(h, []byte{1})
		} else {
			field(h, nil)
		}
		field(h, f.Data)
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
}
