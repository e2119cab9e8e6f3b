package relay

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/pylon-xds/pylon/internal/status"
)

// DefaultReportEvery is how often a relay reports its downstream status
// to a Pylon upstream.
const DefaultReportEvery = 10 * time.Second

// maxReportKeys bounds the keys one report lists (the upstream's bound).
const maxReportKeys = 2000

// Report summarizes the relay's downstream streams per key: a stream is
// NACKed when a type of it rejected its last response, ACKed when every
// type holds the latest, else pending.
func (r *Relay) Report(streams []status.Stream) []status.RelayKey {
	by := map[string]*status.RelayKey{}
	for _, k := range r.Keys() {
		by[k.Key] = &status.RelayKey{Key: k.Key, Version: k.Version}
	}
	for _, s := range streams {
		kr := by[s.Group]
		if s.Gone != nil || kr == nil {
			continue
		}
		kr.Proxies++
		state := status.Synced
		for _, t := range s.Types {
			switch {
			case t.State == status.Nacked:
				state = status.Nacked
			case t.State == status.Stale && state != status.Nacked:
				state = status.Stale
			}
		}
		switch state {
		case status.Nacked:
			kr.NACKed++
		case status.Synced:
			kr.ACKed++
		default:
			kr.Pending++
		}
	}
	out := make([]status.RelayKey, 0, len(by))
	for _, kr := range by {
		out = append(out, *kr)
	}
	slices.SortFunc(out, func(a, b status.RelayKey) int { return strings.Compare(a.Key, b.Key) })
	return out[:min(len(out), maxReportKeys)]
}

// Reporter posts the relay's downstream status to a Pylon upstream's
// admin API (POST /v1/relays/RELAY_ID) every Every, so that the upstream's
// /proxies and pylon status show the proxies behind the relay.
type Reporter struct {
	Rules  *GroupRules // the upstream's admin API: URL and client
	Relay  *Relay
	Every  time.Duration
	Report func() []status.RelayKey
	// Token is the upstream's relay token (read on each report, so a
	// rotation needs no restart): the read token does not authorise a
	// report.
	Token func() (string, error)
}

// Run reports until ctx ends; a failed report is logged once until one
// succeeds (the upstream drops a report not renewed within a minute).
func (p *Reporter) Run(ctx context.Context) error {
	every := p.Every
	if every <= 0 {
		every = DefaultReportEvery
	}
	t := time.NewTicker(every)
	defer t.Stop()
	failing := ""
	log := p.Relay.o.Logger
	for {
		err := p.post(ctx)
		switch {
		case err != nil && ctx.Err() == nil && err.Error() != failing:
			log.Warn("relay: cannot report the downstream status upstream", "url", p.Rules.URL, "err", err)
			failing = err.Error()
		case err == nil && failing != "":
			log.Info("relay: the downstream status is reported upstream again", "url", p.Rules.URL)
			failing = ""
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (p *Reporter) post(ctx context.Context) error {
	b, err := json.Marshal(struct {
		Keys []status.RelayKey `json:"keys"`
	}{p.Report()})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	u := strings.TrimSuffix(p.Rules.URL, "/") + "/v1/relays/" + url.PathEscape(p.Relay.o.ID)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(b))
	if err != nil {
		return err
	}
	tok, err := p.Token()
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	resp, err := p.Rules.Client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("POST /v1/relays: %s", resp.Status)
	}
	return nil
}
