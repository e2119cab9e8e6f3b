package store

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"os"
	"strings"
	"testing"
	"time"
)

// golden reads testdata/values.golden: name -> stored bytes.
func golden(t *testing.T) map[string][]byte {
	t.Helper()
	f, err := os.ReadFile("testdata/values.golden")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	sc := bufio.NewScanner(bytes.NewReader(f))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, h, _ := strings.Cut(line, " ")
		b, err := hex.DecodeString(h)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out[name] = b
	}
	return out
}

// Values the stores wrote before they shared the codec decode to what was
// written, and the same value encodes to the same bytes: existing data
// folders and etcd contents still read, and what is written now reads in
// an older Pylon.
func TestValuesWrittenBeforeReadAndEncodeTheSame(t *testing.T) {
	body := []byte(`{"name":"web"}`)
	want := map[string]Value{
		"body-lease": {Body: body, Expires: time.Unix(1767225600, 123456789)},
		"body":       {Body: body},
		"empty":      {Body: []byte{}},
		"tombstone":  {Deleted: true},
	}
	stored := golden(t)
	if len(stored) != len(want) {
		t.Fatalf("%d golden values, want %d", len(stored), len(want))
	}
	for name, w := range want {
		v, ok := DecodeValue(stored[name])
		if !ok || !bytes.Equal(v.Body, w.Body) || !v.Expires.Equal(w.Expires) || v.Deleted != w.Deleted {
			t.Errorf("%s: decoded %+v %v, want %+v", name, v, ok, w)
		}
		again := Tombstone()
		if !w.Deleted {
			again = EncodeValue(w.Body, w.Expires)
		}
		if !bytes.Equal(again, stored[name]) {
			t.Errorf("%s: encodes to %x, written before as %x", name, again, stored[name])
		}
	}
}

// Bytes that are not a stored value are refused, not read as one.
func TestDamagedValuesAreRefused(t *testing.T) {
	for _, v := range [][]byte{nil, {}, []byte("b"), []byte("b1234567"), []byte("x12345678body"), []byte(`{"json":1}`)} {
		if got, ok := DecodeValue(v); ok {
			t.Errorf("%q decoded as %+v", v, got)
		}
	}
}
