package daemon

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/pylon-xds/pylon/internal/loopback"
	"github.com/pylon-xds/pylon/internal/relay"
	"github.com/pylon-xds/pylon/internal/seal"
	"github.com/pylon-xds/pylon/internal/status"
)

// groupRules is the reader of a Pylon upstream's group rules
// (--upstream-admin), nil without it. The read token crosses in clear
// only to a loopback address: elsewhere the URL must be https, verified
// with --upstream-ca (and the relay's --upstream-cert presented).
func groupRules(ro RelayOptions, tlsCfg *tls.Config, dataDir string, log *slog.Logger) (*relay.GroupRules, error) {
	if ro.UpstreamAdmin == "" {
		if ro.UpstreamReadTokenFile != "" || ro.UpstreamRelayTokenFile != "" {
			return nil, errors.New("--upstream-read-token-file and --upstream-relay-token-file need --upstream-admin")
		}
		return nil, nil
	}
	u, err := url.Parse(ro.UpstreamAdmin)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return nil, fmt.Errorf("--upstream-admin %q: want https://HOST:PORT, the upstream's admin API", ro.UpstreamAdmin)
	}
	if ro.UpstreamReadTokenFile == "" {
		return nil, errors.New("--upstream-admin needs --upstream-read-token-file, the upstream's read token")
	}
	tr := &http.Transport{Proxy: nil, MaxIdleConns: 2, IdleConnTimeout: time.Minute, ResponseHeaderTimeout: 5 * time.Second}
	switch {
	case u.Scheme == "http":
		if !loopback.Host(u.Hostname()) {
			return nil, fmt.Errorf("--upstream-admin %q: http sends the read token in clear; use https (verified with --upstream-ca), or a loopback address", ro.UpstreamAdmin)
		}
	case tlsCfg == nil:
		return nil, fmt.Errorf("--upstream-admin %q: https needs --upstream-ca to verify the upstream's admin certificate", ro.UpstreamAdmin)
	default:
		c := tlsCfg.Clone()
		c.ServerName = "" // the admin API's own host name, not --upstream-server-name
		tr.TLSClientConfig = c
	}
	path := ro.UpstreamReadTokenFile
	return &relay.GroupRules{
		URL: strings.TrimSuffix(ro.UpstreamAdmin, "/"), Client: &http.Client{Transport: tr, Timeout: 10 * time.Second},
		Logger: log, Kept: filepath.Join(dataDir, "relay-groups.json"), Every: ro.GroupsEvery,
		Token: func() (string, error) {
			b, err := os.ReadFile(path)
			if err != nil {
				return "", fmt.Errorf("--upstream-read-token-file: %w", err)
			}
			return strings.TrimSpace(string(b)), nil
		},
	}, nil
}

// runUpstreamAdmin runs, with --upstream-admin, the reading of the
// upstream's group rules and the reports of the relay's downstream status
// to it, until ctx ends.
func runUpstreamAdmin(ctx context.Context, g *errgroup.Group, rules *relay.GroupRules, rl *relay.Relay, tracker *status.Tracker, ro RelayOptions, log *slog.Logger) {
	if rules == nil {
		return
	}
	g.Go(func() error { return rules.Run(ctx) })
	if ro.UpstreamRelayTokenFile == "" {
		log.Info("relay: the downstream status is not reported upstream: it needs --upstream-relay-token-file, the upstream's relay token")
		return
	}
	path := ro.UpstreamRelayTokenFile
	rep := &relay.Reporter{Rules: rules, Relay: rl, Every: ro.ReportEvery,
		Report: func() []status.RelayKey { return rl.Report(tracker.Streams()) },
		Token: func() (string, error) {
			b, err := seal.ReadPrivate(path, "--upstream-relay-token-file", maxRelayToken)
			return strings.TrimSpace(string(b)), err
		}}
	g.Go(func() error { return rep.Run(ctx) })
}
