package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The fleet scenario's pylon-api and pylon-file serve the world through
// the whole daemon, as `pylon serve` does, and make its EDS and route
// changes the way an operator does: pylon-api sends the changed objects
// through the admin API (POST /v1/apply, as `pylon apply` does, without
// the CLI's process start), pylon-file writes the config file in place
// (as an editor saves it; a file renamed into place is read at once by
// every build). The world is churnDoc's (the churn scenario's, which the
// store is seeded with): an EDS change moves the first service's
// endpoints (through the API, that service alone is sent), a route change
// every route's prefix (the one route table), as the pylon server's world
// changes, so what is measured is a
// change's fixed cost (decoding, validating, compiling, hashing, storing,
// debouncing) and its fan-out, beside the pylon server that builds the
// snapshot straight from messages.

// daemonImpl reports whether impl (NAME or NAME@PATH) serves through the
// daemon, and which way changes reach it.
func daemonImpl(impl string) (via string, ok bool) {
	name, _, _ := strings.Cut(impl, "@")
	switch name {
	case "pylon-api":
		return "api", true
	case "pylon-file":
		return "file", true
	}
	return "", false
}

// startDaemonChild starts impl's daemon over a new folder (the config file
// written for pylon-file; the store seeded by the child for pylon-api) and
// sets the child's changes to go the daemon's way. The folder is removed
// when the child stops.
func startDaemonChild(impl, via string, clusters int) (*child, error) {
	dir, err := os.MkdirTemp("", "pylon-fleet-")
	if err != nil {
		return nil, err
	}
	if via == "file" {
		if err := writeFleetDoc(dir, clusters, 0, 0); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	c, err := startChild(impl, clusters, "-dir", dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	c.cleanup = func() { os.RemoveAll(dir) }
	d := &daemonChanges{via: via, dir: dir, clusters: clusters, admin: "http://" + c.ctl}
	if via == "api" {
		tok, err := os.ReadFile(filepath.Join(dir, "data", "admin-token"))
		if err != nil {
			c.stop()
			return nil, err
		}
		d.token = strings.TrimSpace(string(tok))
		d.client = &http.Client{Timeout: time.Minute}
	}
	c.change = d.set
	return c, nil
}

// daemonChanges makes a daemon child's changes.
type daemonChanges struct {
	via, dir, admin, token string
	clusters               int
	client                 *http.Client
	eds, route             int // as last set
}

// set makes the world's endpoints generation eds and routes generation
// route: through the API only the kind that changed, through the file the
// whole config.
func (d *daemonChanges) set(eds, route int) error {
	if d.via == "file" {
		d.eds, d.route = eds, route
		return os.WriteFile(filepath.Join(d.dir, "config.json"), mustFleetDoc(d.clusters, eds, route), 0o600)
	}
	doc := fleetDoc(d.clusters, eds, route)
	body := map[string]any{}
	if eds != d.eds {
		body["services"] = doc["services"].([]svc)[:1]
	}
	if route != d.route {
		body["routes"] = doc["routes"]
	}
	d.eds, d.route = eds, route
	if len(body) == 0 {
		return nil
	}
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequest(http.MethodPost, d.admin+"/v1/apply", strings.NewReader(string(b)))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+d.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := d.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST /v1/apply: %d %s", resp.StatusCode, msg)
	}
	return nil
}

// ep and svc are a service of fleetDoc.
type ep struct {
	Address string `json:"address"`
	Port    int    `json:"port"`
}

type svc struct {
	Name      string `json:"name"`
	Endpoints []ep   `json:"endpoints"`
}

// fleetDoc is churnDoc's world (without registrations) at endpoints
// generation eds and routes generation route; at 0 and 0 it is churnDoc's.
func fleetDoc(clusters, eds, route int) map[string]any {
	type rt struct {
		Match map[string]string   `json:"match"`
		To    []map[string]string `json:"to"`
	}
	var svcs []svc
	var routes []rt
	for i := range clusters {
		s := svc{Name: clusterName(i)}
		for j := range 10 {
			port := 8000 + j
			if i == 0 {
				port += 10 * eds
			}
			s.Endpoints = append(s.Endpoints, ep{Address: fmt.Sprintf("10.%d.%d.%d", i/256, i%256, j), Port: port})
		}
		svcs = append(svcs, s)
		prefix := "/" + s.Name + "/"
		if route > 0 {
			prefix += fmt.Sprintf("%d/", route)
		}
		routes = append(routes, rt{Match: map[string]string{"prefix": prefix}, To: []map[string]string{{"service": s.Name}}})
	}
	return map[string]any{
		"version":  1,
		"services": svcs,
		"routes": []any{map[string]any{"name": "main", "virtual_hosts": []any{map[string]any{
			"name": "all", "domains": []string{"*"}, "routes": routes,
		}}}},
		"listeners": []any{map[string]any{"name": "ingress", "port": 10000, "routes": "main"}},
	}
}

func mustFleetDoc(clusters, eds, route int) []byte {
	b, err := json.Marshal(fleetDoc(clusters, eds, route))
	if err != nil {
		panic(err) // maps of strings and ints
	}
	return b
}

// writeFleetDoc writes the first config file, aside and renamed into
// place.
func writeFleetDoc(dir string, clusters, eds, route int) error {
	tmp := filepath.Join(dir, ".config.json.tmp")
	if err := os.WriteFile(tmp, mustFleetDoc(clusters, eds, route), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, "config.json"))
}
