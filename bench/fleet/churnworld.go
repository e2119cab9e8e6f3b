package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"slices"
)

// The churn schedule: change k is one registration or one deregistration
// of an endpoint, the same sequence for every server and every way in
// (API, file, go-control-plane's cache). Registration r adds endpoint
// seqAddr(r):8080 to service r % clusters; the first `clusters` changes
// register one endpoint per service; after that the changes alternate: a
// registration, then the deregistration of that service's oldest
// registered endpoint. A service thus holds its 10 static endpoints and
// one or two registered ones.
type churnChange struct {
	cluster int
	seq     int // the registered endpoint's number
	dereg   bool
}

func churnAt(k, clusters int) churnChange {
	if k < clusters {
		return churnChange{cluster: k, seq: k}
	}
	j := k - clusters
	if j%2 == 0 {
		r := clusters + j/2
		return churnChange{cluster: r % clusters, seq: r}
	}
	return churnChange{cluster: (j / 2) % clusters, seq: j / 2, dereg: true}
}

// seqBase is where registered endpoints' addresses start: the static
// endpoints use 10.0.0.0/9 (10.i/256.i%256.j), registered ones
// 10.128.0.0/9 and up, so a proxy tells them apart and reads the
// registration's number from the address.
var seqBase = netip.MustParseAddr("10.128.0.0").As4()

func seqAddr(r int) string {
	b := seqBase
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(r)
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}).String()
}

// addrSeq is the registration number of a registered endpoint's address,
// or -1 for a static one.
// addrSeqBytes is addrSeq of an address read off the wire, without
// making a string of it.
func addrSeqBytes(a []byte) int {
	var b, digits [4]int
	i := 0
	for _, c := range a {
		switch {
		case c == '.' && i < 3 && digits[i] > 0:
			i++
		case c >= '0' && c <= '9' && digits[i] < 3 && !(digits[i] == 1 && b[i] == 0):
			b[i], digits[i] = b[i]*10+int(c-'0'), digits[i]+1
		default:
			return -1
		}
	}
	if i != 3 || digits[3] == 0 || b[0] != 10 || b[1] < 128 || b[1] > 255 || b[2] > 255 || b[3] > 255 {
		return -1
	}
	return (b[1]-128)<<16 | b[2]<<8 | b[3]
}

func addrSeq(a string) int {
	ip, err := netip.ParseAddr(a)
	if err != nil || !ip.Is4() {
		return -1
	}
	b := ip.As4()
	if b[0] != 10 || b[1] < 128 {
		return -1
	}
	return int(b[1]-128)<<16 | int(b[2])<<8 | int(b[3])
}

// churnState is what the first k changes leave registered, per service.
type churnState struct {
	clusters int
	regs     []map[int]bool // per service, the registered numbers
	applied  int
}

func newChurnState(clusters int) *churnState {
	s := &churnState{clusters: clusters, regs: make([]map[int]bool, clusters)}
	for i := range s.regs {
		s.regs[i] = map[int]bool{}
	}
	return s
}

// advance applies the changes up to (not including) k and returns them.
func (s *churnState) advance(k int) []churnChange {
	var out []churnChange
	for ; s.applied < k; s.applied++ {
		c := churnAt(s.applied, s.clusters)
		if c.dereg {
			delete(s.regs[c.cluster], c.seq)
		} else {
			s.regs[c.cluster][c.seq] = true
		}
		out = append(out, c)
	}
	return out
}

// churnDoc is the world as a Pylon config document (the model: services,
// one route table, one listener), with the registered endpoints of st
// (nil: none) among the services' endpoints: what the file source reads.
// In store mode the same document seeds the store without them.
func churnDoc(clusters int, st *churnState) ([]byte, error) {
	return churnDocOf(clusters, st, "")
}

// churnDocOf is churnDoc; with a Kubernetes namespace (-via kube) it
// defines no service and routes to the cluster's, ns/service-NNNN.
func churnDocOf(clusters int, st *churnState, ns string) ([]byte, error) {
	type ep struct {
		Address string `json:"address"`
		Port    int    `json:"port"`
	}
	type svc struct {
		Name      string `json:"name"`
		Endpoints []ep   `json:"endpoints"`
	}
	type route struct {
		Match map[string]string   `json:"match"`
		To    []map[string]string `json:"to"`
	}
	var svcs []svc
	var routes []route
	for i := range clusters {
		s := svc{Name: clusterName(i)}
		for j := range 10 {
			s.Endpoints = append(s.Endpoints, ep{Address: fmt.Sprintf("10.%d.%d.%d", i/256, i%256, j), Port: 8000 + j})
		}
		if st != nil {
			// In order: the same registrations make the same file.
			for _, r := range slices.Sorted(maps.Keys(st.regs[i])) {
				s.Endpoints = append(s.Endpoints, ep{Address: seqAddr(r), Port: 8080})
			}
		}
		if ns != "" {
			routes = append(routes, route{Match: map[string]string{"prefix": "/" + s.Name + "/"}, To: []map[string]string{{"service": ns + "/" + s.Name}}})
			continue
		}
		svcs = append(svcs, s)
		routes = append(routes, route{Match: map[string]string{"prefix": "/" + s.Name + "/"}, To: []map[string]string{{"service": s.Name}}})
	}
	if svcs == nil {
		svcs = []svc{}
	}
	return json.Marshal(map[string]any{
		"version":  1,
		"services": svcs,
		"routes": []any{map[string]any{"name": "main", "virtual_hosts": []any{map[string]any{
			"name": "all", "domains": []string{"*"}, "routes": routes,
		}}}},
		"listeners": []any{map[string]any{"name": "ingress", "port": 10000, "routes": "main"}},
	})
}
