// Package route is Pylon's route engine: given the Envoy resources a node
// runs (its group's Listeners, RouteConfigurations, Clusters and
// ClusterLoadAssignments) and a request, it says where the request goes:
// listener, filter chain, virtual host, route, cluster(s) with their shares
// of a weighted split, a redirect or a direct response, and the endpoints
// with their locality, priority, health and weight.
//
// It follows Envoy's documented matching semantics (virtual host domain
// order, first matching route, path, header and query matchers) and, for
// proxyless gRPC, finds the api_listener by target name and runs the same
// matching. What it cannot know or does not model (runtime values, filters
// that may rewrite or answer the request, cluster_header, ...) it does not
// guess at: it names it in Result.NotSimulated.
//
// The package is pure: resources and a request in, a Result out. `pylon
// explain` and the route tests that gate every config change both use it.
package route

import (
	"fmt"
	"net"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// Limits on a request, so that a route test or a command line cannot make
// the engine hold or match megabytes.
const (
	MaxURLBytes    = 8 << 10
	MaxHeaders     = 64
	MaxHeaderBytes = 8 << 10
)

// Request is what is simulated: an HTTP request reaching a listener, or a
// gRPC call of a proxyless client (GRPC true: Authority is the xDS target,
// Path the method "/pkg.Service/Method").
type Request struct {
	Method    string `json:"method"`
	Scheme    string `json:"scheme"`
	Authority string `json:"authority"`
	// Path is the :path header: the path and the query string.
	Path string `json:"path"`
	// Headers are lowercase names with their values in order.
	Headers map[string][]string `json:"headers,omitempty"`
	// Port is the destination port the connection reaches (the listener's
	// port); 0: the port of the authority, else the scheme's default.
	Port uint32 `json:"port,omitempty"`
	// Listener, when set, names the listener instead of finding it by port.
	Listener string `json:"listener,omitempty"`
	// SNI is the TLS server name the client sends; "" on https: the host.
	SNI  string `json:"sni,omitempty"`
	GRPC bool   `json:"grpc,omitempty"`
}

// ParseRequest reads "METHOD URL" (or a URL alone, GET) as written on the
// command line or in a route test: http://, https:// or, for proxyless
// gRPC, xds:///target/pkg.Service/Method. headers are "name: value".
func ParseRequest(line string, headers []string) (Request, error) {
	if len(line) > MaxURLBytes {
		return Request{}, fmt.Errorf("request is %d bytes, over the %d byte limit", len(line), MaxURLBytes)
	}
	method, rawURL, ok := strings.Cut(strings.TrimSpace(line), " ")
	if !ok {
		method, rawURL = "", method
	}
	r, err := NewRequest(method, strings.TrimSpace(rawURL))
	if err != nil {
		return Request{}, err
	}
	if len(headers) > MaxHeaders {
		return Request{}, fmt.Errorf("%d headers, over the limit of %d", len(headers), MaxHeaders)
	}
	for _, h := range headers {
		name, value, ok := strings.Cut(h, ":")
		if !ok {
			return Request{}, fmt.Errorf("header %q: write it as \"name: value\"", short(h))
		}
		if err := r.AddHeader(name, strings.TrimSpace(value)); err != nil {
			return Request{}, err
		}
	}
	return r, nil
}

// NewRequest is a request for method (default GET; POST for gRPC) and url.
func NewRequest(method, rawURL string) (Request, error) {
	if len(rawURL) > MaxURLBytes {
		return Request{}, fmt.Errorf("URL is %d bytes, over the %d byte limit", len(rawURL), MaxURLBytes)
	}
	if after, ok := strings.CutPrefix(rawURL, "xds:///"); ok {
		return grpcRequest(method, after)
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return Request{}, fmt.Errorf("URL %q: %v", short(rawURL), err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return Request{}, fmt.Errorf("URL %q: want http://, https:// or xds:///target/pkg.Service/Method", short(rawURL))
	}
	if u.Host == "" {
		return Request{}, fmt.Errorf("URL %q has no host", short(rawURL))
	}
	if method == "" {
		method = "GET"
	}
	path := u.EscapedPath()
	if path == "" {
		path = "/"
	}
	if u.RawQuery != "" || u.ForceQuery {
		path += "?" + u.RawQuery
	}
	return Request{Method: strings.ToUpper(method), Scheme: u.Scheme, Authority: u.Host, Path: path}, nil
}

// grpcRequest reads target/pkg.Service/Method: the method is the last two
// segments, the target what is before them.
func grpcRequest(method, rest string) (Request, error) {
	i := strings.LastIndex(rest, "/")
	j := -1
	if i > 0 {
		j = strings.LastIndex(rest[:i], "/")
	}
	if j <= 0 || i == len(rest)-1 || i == j+1 {
		return Request{}, fmt.Errorf("xds:///%s: want xds:///TARGET/pkg.Service/Method", short(rest))
	}
	if method == "" || strings.EqualFold(method, "grpc") {
		method = "POST"
	}
	return Request{Method: strings.ToUpper(method), Scheme: "http", Authority: rest[:j], Path: rest[j:], GRPC: true}, nil
}

// AddHeader adds a header value; names are lowercased (HTTP/2 and gRPC
// headers are lowercase; Envoy matches HTTP/1 names without case).
func (r *Request) AddHeader(name, value string) error {
	name = strings.ToLower(strings.TrimSpace(name))
	if name == "" {
		return fmt.Errorf("a header without a name")
	}
	if len(name)+len(value) > MaxHeaderBytes {
		return fmt.Errorf("header %q is over the %d byte limit", short(name), MaxHeaderBytes)
	}
	n := 0
	for _, v := range r.Headers {
		n += len(v)
	}
	if n >= MaxHeaders {
		return fmt.Errorf("more than %d headers", MaxHeaders)
	}
	switch name {
	case ":authority", "host":
		r.Authority = value
		return nil
	case ":method":
		r.Method = value
		return nil
	case ":path":
		r.Path = value
		return nil
	case ":scheme":
		r.Scheme = value
		return nil
	}
	if r.Headers == nil {
		r.Headers = map[string][]string{}
	}
	r.Headers[name] = append(r.Headers[name], value)
	return nil
}

// String is the request as a line: "GET https://host/path".
func (r Request) String() string {
	if r.GRPC {
		return "gRPC xds:///" + r.Authority + r.Path
	}
	return r.Method + " " + r.Scheme + "://" + r.Authority + r.Path
}

// header returns a header's values joined with ",", as Envoy sees a header
// that appears more than once; pseudo headers come from the request line.
func (r *Request) header(name string) (string, bool) {
	switch name {
	case ":authority", "host":
		return r.Authority, true
	case ":method":
		return r.Method, true
	case ":path":
		return r.Path, true
	case ":scheme":
		return r.Scheme, true
	}
	v, ok := r.Headers[name]
	if !ok {
		return "", false
	}
	return strings.Join(v, ","), true
}

// host splits the authority into host and port (0 when none).
func (r *Request) host() (string, uint32) {
	h, p, err := net.SplitHostPort(r.Authority)
	if err != nil {
		return r.Authority, 0
	}
	port, err := strconv.ParseUint(p, 10, 16)
	if err != nil {
		return r.Authority, 0
	}
	return h, uint32(port)
}

// destPort is the port the connection reaches and how it was chosen.
func (r *Request) destPort() (uint32, string) {
	if r.Port != 0 {
		return r.Port, "given"
	}
	if _, p := r.host(); p != 0 {
		return p, "from the authority"
	}
	if r.Scheme == "https" {
		return 443, "https's default"
	}
	return 80, "http's default"
}

// pathOnly is the path without the query string.
func (r *Request) pathOnly() string {
	p, _, _ := strings.Cut(r.Path, "?")
	return p
}

// query is the request's query parameters, decoded.
func (r *Request) query() url.Values {
	_, q, ok := strings.Cut(r.Path, "?")
	if !ok {
		return nil
	}
	v, _ := url.ParseQuery(q)
	return v
}

// HeaderLines returns the headers as "name: value" lines, sorted.
func (r *Request) HeaderLines() []string {
	var out []string
	for k, vs := range r.Headers {
		for _, v := range vs {
			out = append(out, k+": "+v)
		}
	}
	sort.Strings(out)
	return out
}

func short(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
