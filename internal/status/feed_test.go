package status_test

import (
	"time"

	"github.com/pylon-xds/pylon/internal/status"
	"github.com/pylon-xds/pylon/internal/status/statustest"
)

// fed is a tracker and statustest's feed of its live streams in one value:
// a test tells the feed what happened on a stream and reads the tracker,
// through the same variable.
type fed struct {
	*status.Tracker
	*statustest.Feed
}

func newFeed(t *status.Tracker) fed { return fed{Tracker: t, Feed: statustest.New(t)} }

// Seen is the feed's, which tells the tracker as well.
func (f fed) Seen(id uint64, who status.Who, group string, at time.Time) {
	f.Feed.Seen(id, who, group, at)
}
