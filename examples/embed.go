// Package examples holds Pylon's example configurations. The quickstart is
// compiled into the binary as the config served when no --config is given.
package examples

import (
	"bytes"
	_ "embed"
)

//go:embed quickstart.yaml
var quickstart []byte

// QuickstartName is the name the embedded quickstart is reported under.
const QuickstartName = "embedded:examples/quickstart.yaml"

// Quickstart returns the quickstart configuration.
func Quickstart() []byte { return bytes.Clone(quickstart) }
