package guard

import (
	"testing"

	"go.uber.org/goleak"
)

// The send watch's timer calls back on a goroutine of its own.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
