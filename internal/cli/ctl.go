package cli

import (
	"io"

	"github.com/pylon-xds/pylon/internal/ctl"
)

// The admin API's client, its flags and the read commands' -o are ctl's,
// which pylonctl shares: these names keep cli's code as it reads.
type (
	adminFlags  = ctl.Flags
	adminClient = ctl.Client
	output      = ctl.Output
)

// render prints v as JSON or YAML, as ctl's commands do.
func render(w io.Writer, format string, v any) error { return ctl.Render(w, format, v) }
