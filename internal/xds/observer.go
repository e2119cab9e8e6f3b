package xds

import "github.com/pylon-xds/pylon/internal/status"

// The server reports what happens on its streams as status.Events to the
// Observer of its Options (status.Observer, status.Selective): status
// holds the vocabulary, the server fills it.

type nopObserver struct{}

func (nopObserver) Observe(*status.Event) {}
