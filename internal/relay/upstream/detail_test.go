package upstream

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
)

// A NACK's error_detail is cut to its bound on a character boundary: a cut
// through a character (a downstream proxy chooses what sits at byte 4096)
// made a string protobuf refuses to encode, and the send failed.
func TestErrorDetailIsCutOnACharacterBoundary(t *testing.T) {
	for _, msg := range []string{
		strings.Repeat("a", maxDetail-1) + "é",
		strings.Repeat("a", maxDetail-2) + "日本",
		strings.Repeat("é", maxDetail),
	} {
		st := errorDetail(msg)
		if len(st.GetMessage()) > maxDetail {
			t.Errorf("detail of %d bytes, over the bound of %d", len(st.GetMessage()), maxDetail)
		}
		if _, err := proto.Marshal(st); err != nil {
			t.Errorf("a detail cut from %d bytes does not encode: %v", len(msg), err)
		}
	}
}
