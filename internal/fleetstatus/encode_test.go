package fleetstatus

import (
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pylon-xds/pylon/internal/status"
)

// stream is an open ADS stream of node with a CDS type, NACKed with detail.
func stream(node, detail string) status.Stream {
	at := time.Date(2026, 12, 1, 7, 0, 0, 0, time.UTC)
	return status.Stream{
		Node: node, Cluster: "edge", Group: "g", Kind: "ADS", Since: at,
		Types: []*status.Type{{
			Type: "CDS", State: status.Nacked,
			Sent:     &status.Stamp{Version: "v2", At: at},
			ACKed:    &status.Stamp{Version: "v1", At: at},
			LastNACK: &status.NACK{Version: "v2", Detail: detail, At: at},
		}},
	}
}

func noise(n int) string {
	b := make([]byte, n/2)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// A summary bigger than one value is split into shards that each fit and
// together decode to every proxy, in order. Random NACK details do not
// compress, so the size bound, not gzip, does the work.
func TestEncodeSplitsIntoBoundedShards(t *testing.T) {
	var streams []status.Stream
	for i := range 300 {
		streams = append(streams, stream(fmt.Sprintf("node-%03d", i), noise(900)))
	}
	proxies, omitted := Summarize(streams, 1000)
	if omitted != 0 || len(proxies) != 300 {
		t.Fatalf("summarized %d, omitted %d", len(proxies), omitted)
	}
	const maxValue = 32 << 10
	shards, err := Encode(7, Self{}, proxies, 0, maxValue)
	if err != nil {
		t.Fatal(err)
	}
	if len(shards) < 300*900/maxValue {
		t.Fatalf("%d shards for ~%d bytes of incompressible text in values of %d", len(shards), 300*900, maxValue)
	}
	for i, s := range shards {
		if len(s) > maxValue {
			t.Errorf("shard %d is %d bytes, more than %d", i, len(s), maxValue)
		}
	}
	got, _, err := Decode(shards)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(proxies, got); diff != "" {
		t.Errorf("decoded differs (-want +got):\n%s", diff)
	}
}

// Every text is cut to 1 KiB and redacted; closed streams are left out;
// past max, streams are counted, not published.
func TestSummarizeBoundsAndRedacts(t *testing.T) {
	key := "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\n-----END PRIVATE KEY-----"
	gone := time.Now()
	closed := stream("closed", "x")
	closed.Gone = &gone
	streams := []status.Stream{stream("a", "bad cluster: "+key), stream(strings.Repeat("n", 5000), strings.Repeat("é", 3000)), closed, stream("c", "x"), stream("d", "x")}
	proxies, omitted := Summarize(streams, 3)
	if len(proxies) != 3 || omitted != 1 {
		t.Fatalf("got %d proxies, %d omitted; want 3 and 1 (the closed stream is not counted)", len(proxies), omitted)
	}
	if d := proxies[0].Types[0].NACK.Detail; strings.Contains(d, "MIIEvQ") || strings.Contains(d, "PRIVATE KEY-----\n") {
		t.Errorf("key material published: %q", d)
	}
	long := proxies[1]
	if len(long.Node) > maxText+len("…") || len(long.Types[0].NACK.Detail) > maxText+len("…") {
		t.Errorf("texts not bounded: node %d bytes, detail %d bytes", len(long.Node), len(long.Types[0].NACK.Detail))
	}
	if !strings.HasSuffix(long.Types[0].NACK.Detail, "é…") {
		t.Errorf("a cut detail should end on a whole rune and say it was cut: %q", long.Types[0].NACK.Detail[len(long.Types[0].NACK.Detail)-8:])
	}
	for _, p := range proxies {
		if p.Node == "closed" {
			t.Error("a closed stream was published")
		}
	}
}

// A small value that inflates past the bound is refused, not read whole.
func TestDecodeRefusesAnInflatingValue(t *testing.T) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zeros := make([]byte, 1<<20)
	for range maxDecoded>>20 + 1 {
		if _, err := zw.Write(zeros); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if buf.Len() > 1<<20 {
		t.Fatalf("the test's bomb is %d bytes", buf.Len())
	}
	_, _, err := Decode([][]byte{buf.Bytes()})
	if err == nil || !strings.Contains(err.Error(), "value 0: more than") {
		t.Fatalf("got %v, want the value refused for its decompressed size", err)
	}
}

// Shards are written one by one: a reader keeps the newest generation and
// says when it is incomplete.
func TestDecodeKeepsTheNewestGeneration(t *testing.T) {
	old, _ := Summarize([]status.Stream{stream("old", "x")}, 10)
	cur, _ := Summarize([]status.Stream{stream("new-1", noise(900)), stream("new-2", noise(900))}, 10)
	o, err := Encode(1, Self{}, old, 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	// A value that holds one of the new proxies but not two: gen 2 has
	// two shards.
	one, _ := Encode(2, Self{}, cur[:1], 0, 1<<20)
	two, _ := Encode(2, Self{}, cur[1:], 0, 1<<20)
	n, err := Encode(2, Self{}, cur, 0, max(len(one[0]), len(two[0]))+64)
	if err != nil || len(n) != 2 {
		t.Fatalf("%d shards (%v), want 2", len(n), err)
	}
	// The new shard 0 written, the old one not yet replaced by shard 1.
	got, _, err := Decode([][]byte{n[0], o[0]})
	if err == nil || len(got) != 1 || got[0].Node != "new-1" {
		t.Fatalf("got %v (%v), want new-1 only and an incomplete-summary note", got, err)
	}
	got, _, err = Decode(n)
	if err != nil || len(got) != 2 {
		t.Fatalf("got %v (%v)", got, err)
	}
}
