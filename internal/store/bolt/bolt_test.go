package bolt

import (
	"testing"

	"github.com/pylon-xds/pylon/internal/store"
	"github.com/pylon-xds/pylon/internal/store/storetest"
)

func TestConformance(t *testing.T) {
	dirs := map[string]string{}
	opened := map[string]*Store{}
	storetest.Run(t, func(t *testing.T, reopen bool) store.Store {
		t.Helper()
		dir, ok := dirs[t.Name()]
		if !reopen || !ok {
			dir = t.TempDir()
			dirs[t.Name()] = dir
		} else if s := opened[t.Name()]; s != nil {
			s.Close()
		}
		s, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		opened[t.Name()] = s
		t.Cleanup(func() { s.Close() })
		return s
	})
}
