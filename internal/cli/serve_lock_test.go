package cli

import (
	"bytes"
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
)

// A second serve on a data folder another serve holds stops saying so,
// naming the process, not with bbolt's bare "timeout".
func TestSecondServeOnTheSameDataFolder(t *testing.T) {
	d := startServe(t)
	var out, errb bytes.Buffer
	code := execute(context.Background(), []string{"serve", "--xds-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--data-dir", d.dataDir}, &out, &errb, func(string) string { return "" })
	if code == 0 || !strings.Contains(errb.String(), "another process holds") || !strings.Contains(errb.String(), "process "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("a second serve on %s: exit %d, %s", d.dataDir, code, errb.String())
	}
}
