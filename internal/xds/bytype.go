package xds

import "slices"

// byType holds a stream's per-type watches, looked up by type URL. A stream
// has a handful (four for an Envoy on ADS), and a map of four entries
// costs every stream about 450 bytes where two short slices scanned in
// order cost a fraction of it, at no measurable cost to lookups this
// small. They are kept in the registry's make-before-break order, so a
// push walks the stream's few watches rather than looking up each of the
// registry's types.
type byType[W any] struct {
	urls []string
	ws   []W
	// ranks are the watches' places in the registry's Ranked order.
	ranks []int
}

// at returns the watch of url, the zero W when there is none.
func (b *byType[W]) at(url string) W {
	w, _ := b.get(url)
	return w
}

func (b *byType[W]) get(url string) (W, bool) {
	for i, u := range b.urls {
		if u == url {
			return b.ws[i], true
		}
	}
	var zero W
	return zero, false
}

// put adds url's watch, url being the rank-th of the registry's Ranked
// types; url must not have one yet.
func (b *byType[W]) put(url string, rank int, w W) {
	i := len(b.ranks)
	for i > 0 && b.ranks[i-1] > rank {
		i--
	}
	b.urls = slices.Insert(b.urls, i, url)
	b.ws = slices.Insert(b.ws, i, w)
	b.ranks = slices.Insert(b.ranks, i, rank)
}
