package protocol

// pendingSent are a delta watch's responses not yet ACKed or NACKed, by
// nonce. A client answers each response before the next is sent, mostly:
// the one pending response is kept in first, and only others go to a map.
// A map made for every push was about 1.4 KB (one group of eight slots of
// nonce and 160-byte record, for one entry) on every delta stream of the
// fleet at each change; this is one 192-byte object, and nil once nothing
// is pending. Nonces are never empty: first is free when its nonce is.
type pendingSent struct {
	nonce string
	first deltaSent
	more  map[string]deltaSent
}

func (p *pendingSent) len() int {
	if p == nil {
		return 0
	}
	n := len(p.more)
	if p.nonce != "" {
		n++
	}
	return n
}

func (p *pendingSent) get(nonce string) (deltaSent, bool) {
	if p == nil {
		return deltaSent{}, false
	}
	if nonce == p.nonce && nonce != "" {
		return p.first, true
	}
	s, ok := p.more[nonce]
	return s, ok
}

// put records nonce's response; p must not be nil.
func (p *pendingSent) put(nonce string, s deltaSent) {
	if p.nonce == "" {
		p.nonce, p.first = nonce, s
		return
	}
	if p.more == nil {
		p.more = map[string]deltaSent{}
	}
	p.more[nonce] = s
}

// del forgets nonce's response and reports whether none is left.
func (p *pendingSent) del(nonce string) (empty bool) {
	if nonce == p.nonce {
		p.nonce, p.first = "", deltaSent{}
	} else {
		delete(p.more, nonce)
	}
	return p.len() == 0
}

// oldest is the nonce of the response sent first, "" if none is pending.
func (p *pendingSent) oldest() string {
	oldest, at := p.nonce, p.first.at
	for n, s := range p.more {
		if oldest == "" || s.at.Before(at) {
			oldest, at = n, s.at
		}
	}
	return oldest
}
