package ctl

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"
)

// Output is a read command's -o flag: table (for people), json or yaml
// (for scripts).
type Output struct{ Format string }

// Register adds -o to cmd.
func (o *Output) Register(cmd *cobra.Command) {
	cmd.Flags().StringVarP(&o.Format, "output", "o", "table", "output format: table, json or yaml")
}

// Check refuses an unknown format before any request is made.
func (o Output) Check() error {
	switch o.Format {
	case "table", "json", "yaml":
		return nil
	}
	return fmt.Errorf("-o %q: want table, json or yaml", o.Format)
}

// Table says the output is for people.
func (o Output) Table() bool { return o.Format == "table" }

// Render prints v as JSON or YAML (through JSON, so both have the same
// field names).
func Render(w io.Writer, format string, v any) error {
	js, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	switch format {
	case "json":
		_, err = fmt.Fprintln(w, string(js))
	case "yaml":
		var y []byte
		if y, err = yaml.JSONToYAML(js); err == nil {
			_, err = w.Write(y)
		}
	default:
		err = fmt.Errorf("-o %q: want table, json or yaml", format)
	}
	return err
}
