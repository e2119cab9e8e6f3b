package route_test

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/pylon-xds/pylon/internal/compile"
	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/golden"
	"github.com/pylon-xds/pylon/internal/route"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

var update = flag.Bool("update", false, "rewrite testdata/<case>/out.txt")

// TestGolden compiles testdata/<case>/config.yaml (raw Envoy resources or
// the model, as Pylon serves them), runs every request of requests.txt
// through the engine and compares what it says with out.txt. The cases are
// Envoy's documented examples of its matching rules; each file says which
// documentation it follows. Run with -update to rewrite; that also deletes
// out.txt of removed cases.
//
// requests.txt: a request per line, "METHOD URL" with optional
// " @port=N", " @listener=NAME", " @sni=NAME"; indented lines under it are
// its headers ("name: value"); lines starting with # are comments.
func TestGolden(t *testing.T) {
	cases, err := os.ReadDir("testdata")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		if !c.IsDir() {
			continue
		}
		dir := filepath.Join("testdata", c.Name())
		t.Run(c.Name(), func(t *testing.T) {
			cfg := filepath.Join(dir, "config.yaml")
			if _, err := os.Stat(cfg); os.IsNotExist(err) {
				if *update {
					os.Remove(filepath.Join(dir, "out.txt"))
				}
				return
			}
			res := compiled(t, cfg)
			var out strings.Builder
			for _, req := range readRequests(t, filepath.Join(dir, "requests.txt")) {
				r, err := route.Explain(res, req)
				if err != nil {
					fmt.Fprintf(&out, "request\t%s\nerror: %v\n\n", req, err)
					continue
				}
				if err := route.WriteText(&out, r); err != nil {
					t.Fatal(err)
				}
				out.WriteString("\n")
			}
			golden.Check(t, filepath.Join(dir, "out.txt"), out.String(), *update)
		})
	}
}

// compiled is the resources of the only group of a config file.
func compiled(t *testing.T, path string) *route.Resources {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fleet, err := compile.Compile(xdstype.New(), []config.File{{Path: path, Data: data, Dir: filepath.Dir(path)}}, nil)
	if err != nil {
		t.Fatalf("%s refused: %v", path, err)
	}
	return route.FromSnapshot(fleet.Groups()[0].Snapshot)
}

func readRequests(t *testing.T, path string) []route.Request {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []route.Request
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, " "):
			if len(out) == 0 {
				t.Fatalf("%s: a header before any request", path)
			}
			name, value, _ := strings.Cut(strings.TrimSpace(line), ":")
			if err := out[len(out)-1].AddHeader(name, strings.TrimSpace(value)); err != nil {
				t.Fatal(err)
			}
		default:
			out = append(out, requestLine(t, line))
		}
	}
	return out
}

func requestLine(t *testing.T, line string) route.Request {
	t.Helper()
	fields := strings.Fields(line)
	var opts []string
	for len(fields) > 0 && strings.HasPrefix(fields[len(fields)-1], "@") {
		opts = append(opts, fields[len(fields)-1])
		fields = fields[:len(fields)-1]
	}
	r, err := route.ParseRequest(strings.Join(fields, " "), nil)
	if err != nil {
		t.Fatalf("%q: %v", line, err)
	}
	for _, o := range opts {
		k, v, _ := strings.Cut(o[1:], "=")
		switch k {
		case "port":
			p, err := strconv.ParseUint(v, 10, 16)
			if err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			r.Port = uint32(p)
		case "listener":
			r.Listener = v
		case "sni":
			r.SNI = v
		default:
			t.Fatalf("%q: unknown option %s", line, o)
		}
	}
	return r
}
