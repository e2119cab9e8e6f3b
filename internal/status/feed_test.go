package status

import (
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
)

// feed feeds a tracker's streams live, as the xds server's are: each
// keeps its own stamps (fakeLive), which the tracker reads when asked. It
// is statustest.Feed, which this package's own tests cannot import.
type feed struct {
	*Tracker
	mu    sync.Mutex
	lives map[uint64]*fakeLive
}

func newFeed(tr *Tracker) *feed { return &feed{Tracker: tr, lives: map[uint64]*fakeLive{}} }

// live returns stream id, attached when first asked for.
func (f *feed) live(id uint64, who Who, at time.Time) *fakeLive {
	f.mu.Lock()
	l := f.lives[id]
	if l == nil {
		l = &fakeLive{stamps: map[string]Stamps{}}
		f.lives[id] = l
	}
	f.mu.Unlock()
	f.Attach(id, who, l, at)
	return l
}

// update runs fn on stream id's stamps of url, with an entry of url in the
// tracker.
func (f *feed) update(id uint64, who Who, url string, at time.Time, entry bool, fn func(p *Stamps)) {
	l := f.live(id, who, at)
	if entry {
		f.Requested(id, who, url, at)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.stamps[url]
	fn(&p)
	l.stamps[url] = p
}

func (f *feed) Seen(id uint64, who Who, group string, at time.Time) {
	f.Tracker.Seen(id, who, group, at)
	l := f.live(id, who, at)
	l.mu.Lock()
	l.group = group
	l.mu.Unlock()
}

func (f *feed) Sent(id uint64, who Who, url string, st Stamp, size int, sent []proto.Message, removed []string) {
	f.update(id, who, url, st.At, true, func(p *Stamps) {
		feedSent(p, st, sent, removed)
		p.Responses++
		p.ResponseBytes += uint64(max(size, 0))
	})
}

func (f *feed) Spared(id uint64, who Who, url string, st Stamp, held []proto.Message) {
	f.update(id, who, url, st.At, true, func(p *Stamps) {
		feedSent(p, st, held, nil)
		feedACK(p, Stamp{Version: st.Version, Set: st.Set, At: st.At})
	})
}

func (f *feed) ACKed(id uint64, who Who, url string, st Stamp) {
	f.update(id, who, url, st.At, true, func(p *Stamps) {
		feedACK(p, st)
		p.ACKs++
	})
}

func (f *feed) Expect(id uint64, who Who, url, version string, at time.Time) {
	f.ExpectOf(id, who, url, version, "", at)
}

func (f *feed) ExpectOf(id uint64, who Who, url, version, set string, at time.Time) {
	if version == "" || set == version {
		set = ""
	}
	f.update(id, who, url, at, false, func(p *Stamps) { p.Expected, p.ExpectedSet = version, set })
}

func feedSent(p *Stamps, st Stamp, sent []proto.Message, removed []string) {
	if st.Set == st.Version {
		st.Set = ""
	}
	p.Sent, p.LastSent, p.LastRemoved = st, sent, removed
}

func feedACK(p *Stamps, st Stamp) {
	if st.Set == st.Version {
		st.Set = ""
	}
	if p.ACKed.At.IsZero() || p.ACKed.Version != st.Version {
		p.ACKedSince = st.At
	}
	p.ACKed = st
}
