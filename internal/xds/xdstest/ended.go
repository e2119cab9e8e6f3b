package xdstest

import (
	"errors"
	"io"
)

// Ended reports, without waiting, whether the stream has ended and with
// what error (nil for a clean end).
func (b *base[Resp]) Ended() (bool, error) {
	select {
	case err := <-b.errc:
		b.errc <- err
		if errors.Is(err, io.EOF) {
			return true, nil
		}
		return true, err
	default:
		return false, nil
	}
}
