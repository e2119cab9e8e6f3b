package bolt

import "encoding/json"

// decodeMeta reads an object's record, JSON as encodeMeta writes it.
func decodeMeta(v []byte) (meta, error) {
	var m meta
	err := json.Unmarshal(v, &m)
	return m, err
}

// encodeMeta writes an object's record.
func encodeMeta(m meta) ([]byte, error) { return json.Marshal(m) }
