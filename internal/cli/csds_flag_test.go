package cli

import (
	"slices"
	"testing"

	"github.com/spf13/cobra"

	"github.com/pylon-xds/pylon/internal/daemon"
)

// --csds-identity is repeatable and lands in daemon.Options.CSDSIdentities.
func TestCSDSIdentityFlag(t *testing.T) {
	var o daemon.Options
	cmd := &cobra.Command{Use: "serve"}
	addSecurityFlags(cmd, &o)
	args := []string{"--csds-identity", "spiffe://example.org/ns/ops/sa/*", "--csds-identity", "ops.example.com"}
	if err := cmd.ParseFlags(args); err != nil {
		t.Fatal(err)
	}
	want := []string{"spiffe://example.org/ns/ops/sa/*", "ops.example.com"}
	if !slices.Equal(o.CSDSIdentities, want) {
		t.Fatalf("CSDSIdentities = %q, want %q", o.CSDSIdentities, want)
	}
}
