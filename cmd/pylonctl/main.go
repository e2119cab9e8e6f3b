// Command pylonctl changes a running Pylon's config through its admin API:
// pylon's apply, delete, endpoints, rollback, history and diff, with the
// same flags and output, in a binary that links none of the server and so
// starts in a few milliseconds (pylon takes about 20 to run its
// libraries' inits). For scripts and CI that apply often.
package main

import (
	"context"
	"os"

	"github.com/pylon-xds/pylon/internal/ctl"
)

func main() {
	// No signal is caught: an interrupt ends pylonctl at once, and a
	// write the server has not finished is refused or done whole there.
	os.Exit(ctl.Execute(context.Background(), os.Args[1:], os.Stdout, os.Stderr, os.Getenv))
}
