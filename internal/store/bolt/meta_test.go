package bolt

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The hand-made record codec is encoding/json's: every record encodes to
// json.Marshal's bytes and decodes to json.Unmarshal's value and error
// (times compared with their location), the records of the fast form and
// any other alike.
func TestMetaCodecAsJSON(t *testing.T) {
	east := time.FixedZone("east", 2*3600)
	for _, m := range []meta{
		{Revision: 1},
		{Revision: 1234567890123},
		{Revision: 7, Expires: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)},
		{Revision: 8, Expires: time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.UTC)},
		{Revision: 9, Expires: time.Date(2026, 1, 2, 3, 4, 5, 120000000, east)},
		{Revision: 10, Expires: time.Now()},
		{Revision: 11, Expires: time.Now().Add(time.Hour).Round(0)},
	} {
		got, err := encodeMeta(m)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(m)
		if !bytes.Equal(got, want) {
			t.Errorf("encodeMeta(%v) = %s, json.Marshal %s", m, got, want)
		}
	}
	for _, v := range []string{
		`{"revision":1}`,
		`{"revision":42,"expires":"2026-01-02T03:04:05Z"}`,
		`{"revision":42,"expires":"2026-01-02T03:04:05.123456789Z"}`,
		`{"revision":42,"expires":"2026-01-02T05:04:05.12+02:00"}`,
		`{"revision":42,"expires":"2026-01-02T03:04:05"}`,
		`{"revision":42,"expires":"not a time"}`,
		`{"revision":42,"expires":"2026-01-02T03:04:05\u005a"}`,
		`{"revision":42,"expires":null}`,
		`{"revision":42,"expires":""}`,
		`{"revision":42,"expires":"2026-01-02T03:04:05Z","x":1}`,
		`{"expires":"2026-01-02T03:04:05Z","revision":42}`,
		`{"revision": 42}`,
		`{"revision":042}`,
		`{"revision":0}`,
		`{"revision":-3}`,
		`{"revision":1.5}`,
		`{"revision":99999999999999999999}`,
		`{"revision":12}x`,
		`{"revision":12`,
		`{"revision":12,"expires":"2026-01-02T03:04:05Z"`,
		`{"revision":12,"expires":"2026-01-02T03:04:05Z""}`,
		`{}`,
		``,
	} {
		got, gotErr := decodeMeta([]byte(v))
		var want meta
		wantErr := json.Unmarshal([]byte(v), &want)
		if (gotErr == nil) != (wantErr == nil) {
			t.Errorf("%s: decodeMeta error %v, json.Unmarshal %v", v, gotErr, wantErr)
			continue
		}
		if wantErr != nil {
			continue
		}
		if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) && a.Location().String() == b.Location().String() })); diff != "" {
			t.Errorf("%s: decodeMeta differs from json.Unmarshal (-json +decodeMeta):\n%s", v, diff)
		}
	}
}
