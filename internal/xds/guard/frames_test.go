package guard

import "testing"

// goAwayFrame is an HTTP/2 GOAWAY with error code ENHANCE_YOUR_CALM.
var goAwayFrame = []byte{0, 0, 8, frameGoAway, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, codeEnhanceYourCalm}

// TestFrameWatchReadsPlaintextFrames: the watch finds a GOAWAY in what
// an HTTP/2 server writes, a SETTINGS frame first.
func TestFrameWatchReadsPlaintextFrames(t *testing.T) {
	var f frameWatch
	var got []uint32
	f.feed([]byte{0, 0, 0, 0x4, 0, 0, 0, 0, 0}, func(byte, uint32) { t.Fatal("SETTINGS read as GOAWAY or RST_STREAM") })
	f.feed(goAwayFrame, func(typ byte, code uint32) { got = append(got, code) })
	if len(got) != 1 || got[0] != codeEnhanceYourCalm {
		t.Fatalf("codes %v, want one ENHANCE_YOUR_CALM", got)
	}
}

// TestFrameWatchOffForTLS: a connection whose first write is a TLS
// record (TLS credentials not wrapped by Server.Credentials) is
// ciphertext: the watch reads nothing from it, even bytes that would
// parse as a GOAWAY where the record's header, read as a frame's,
// says one starts.
func TestFrameWatchOffForTLS(t *testing.T) {
	var f frameWatch
	on := func(typ byte, code uint32) { t.Fatalf("frame %d with code %d read from ciphertext", typ, code) }
	// A TLS handshake record's header, read as a frame header: a frame of
	// 0x160303 bytes; then that many bytes; then what looks like GOAWAY.
	f.feed([]byte{tlsRecordHandshake, 0x03, 0x03, 0, 0, 0, 0, 0, 0}, on)
	f.feed(make([]byte, 0x160303), on)
	f.feed(goAwayFrame, on)
}
