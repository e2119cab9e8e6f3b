package xds

// byType holds a stream's per-type watches, looked up by type URL. A stream
// has a handful (four for an Envoy on ADS), and a map of four entries
// costs every stream about 450 bytes where two short slices scanned in
// order cost a fraction of it, at no measurable cost to lookups this
// small.
type byType[W any] struct {
	urls []string
	ws   []W
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

// put adds url's watch; url must not have one yet.
func (b *byType[W]) put(url string, w W) {
	b.urls = append(b.urls, url)
	b.ws = append(b.ws, w)
}
