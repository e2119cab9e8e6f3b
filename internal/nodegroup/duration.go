package nodegroup

import (
	"fmt"
	"time"
)

// Duration is a time.Duration written as "1.5s" in configs: a rollout's
// bake time, and the model's timeouts too, one type so that the config's
// explanations and checks know every duration a document holds.
type Duration time.Duration

// UnmarshalText reads a Go duration string. Its error quotes the value,
// so that the decoder can find the field it was written under.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("value %q is not a duration (write it like \"1.5s\" or \"250ms\")", b)
	}
	*d = Duration(v)
	return nil
}

// Std returns d as a time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }
