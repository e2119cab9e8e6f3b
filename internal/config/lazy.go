package config

import (
	"regexp"
	"sync"
)

// lazyRegexp is expr compiled on first use, once: compiled at package
// init, every process that imports the package (`pylon apply`, `pylon
// version`) paid for expressions most runs never match.
func lazyRegexp(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}
