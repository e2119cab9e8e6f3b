package admin

import (
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/pylon-xds/pylon/internal/model"
)

// registerEndpointPut adds PUT /v1/services/{name}/endpoints/{addr}:
// register-or-renew, named by its path as DELETE is. Registering an
// endpoint again only renews it, so the call is idempotent, and PUT says
// so to HTTP clients: a registrant may retry it on any connection error
// (a keep-alive connection closed just as it was reused) without asking
// whether the first attempt arrived, which a POST does not let clients
// assume.
func (a api) registerEndpointPut(mux *http.ServeMux) {
	mux.HandleFunc("PUT /v1/services/{name}/endpoints/{addr}", a.writeEndpoints(maxEndpointBody, func(w http.ResponseWriter, r *http.Request) {
		e, ttl, err := endpointRequest(r)
		if err == nil {
			e, err = endpointAt(r.PathValue("addr"), e)
		}
		if err != nil {
			fail(w, err)
			return
		}
		a.register(w, r, e, ttl)
	}))
}

// register registers (or renews) e for the service the path names, and
// answers: POST's and PUT's common end.
func (a api) register(w http.ResponseWriter, r *http.Request, e model.Endpoint, ttl time.Duration) {
	noteChanges(r, "endpoints."+r.PathValue("name")+"/"+net.JoinHostPort(e.Address, strconv.FormatUint(uint64(e.Port), 10)))
	res, err := a.cfg().Register(r.Context(), r.PathValue("name"), e, ttl)
	if err != nil {
		fail(w, err)
		return
	}
	noteResult(r, res)
	writeJSON(w, http.StatusOK, res)
}

// endpointAt is e at the path's ADDRESS:PORT. The body may leave the
// address and port out; given, they must be the path's, so that one call
// never names two endpoints.
func endpointAt(addr string, e model.Endpoint) (model.Endpoint, error) {
	host, port, err := hostPort(addr)
	if err != nil {
		return e, err
	}
	if e.Address != "" && e.Address != host || e.Port != 0 && e.Port != port {
		return e, badRequest("the body names endpoint %s, the path %s: leave address and port out of the body, or give the path's", truncate(net.JoinHostPort(e.Address, strconv.FormatUint(uint64(e.Port), 10))), truncate(addr))
	}
	e.Address, e.Port = host, port
	return e, nil
}
