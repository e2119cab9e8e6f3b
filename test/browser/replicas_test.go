package browser

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/pylon-xds/pylon/internal/daemon"
	"github.com/pylon-xds/pylon/internal/store/etcd/etcdtest"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
)

// startReplicas runs two Pylons sharing one etcd, each publishing its
// proxies' summary every 100ms, and giving up on an etcd call after 1s
// (a stopped etcd shows within seconds).
func startReplicas(t *testing.T) (a, b *pylon, srv *etcdtest.Server) {
	t.Helper()
	srv = etcdtest.Start(t)
	opts := func(id string) daemon.Options {
		o := daemon.Options{Identifier: id, Store: daemon.StoreEtcd, Etcd: daemon.EtcdOptions{Endpoints: []string{srv.Endpoint()}},
			FleetStatusPeriod: 100 * time.Millisecond}
		o.Etcd.Timeout = time.Second
		return o
	}
	return startPylon(t, opts("pylon-a")), startPylon(t, opts("pylon-b")), srv
}

// The page of a proxy served by another replica shows what that replica
// publishes (its replica, its types' states and versions) and says what
// is not known here, rather than zero times, counts and stream ids, or a
// comparison with the config it cannot make.
func TestAnotherReplicasProxy(t *testing.T) {
	ctx := browser(t)
	a, b, _ := startReplicas(t)
	_, v := a.apply(t, document(false))
	b.waitServing(t, v)
	far := xdstest.NewProxy(t, xdstest.Dial(t, b.xdsAddr), "edge-1", false)
	near := xdstest.NewProxy(t, xdstest.Dial(t, a.xdsAddr), "edge-2", false)
	far.Settle()
	near.Settle()
	eventually(t, "edge-1 on pylon-a's list, SYNCED, from pylon-b", func() bool {
		_, body := a.call(t, a.readToken, "GET", "/proxies/edge-1", nil)
		var d struct {
			Streams []struct {
				Replica string
				Remote  bool
				Types   []struct{ Type, State string }
			}
		}
		if json.Unmarshal([]byte(body), &d) != nil || len(d.Streams) != 1 || !d.Streams[0].Remote || d.Streams[0].Replica != "pylon-b" {
			return false
		}
		for _, ty := range d.Streams[0].Types {
			if ty.Type == "CDS" {
				return ty.State == "SYNCED"
			}
		}
		return false
	})

	a.signIn(t, ctx, a.readToken)
	goTo(t, ctx, "#/proxy/edge-1")
	waitJS(t, ctx, "CDS SYNCED", `!!document.querySelector('table.types tr[data-type="CDS"] .badge[data-state="SYNCED"]')`)
	text := get(t, ctx, "the page", chromedp.Evaluate[string](`document.body.innerText`))
	for _, nonsense := range []string{"d ago", "0 resources", "Stream", "in sync", "not sent yet", "Should run"} {
		if strings.Contains(text, nonsense) {
			t.Errorf("the page of another replica's proxy says %q", nonsense)
		}
	}
	waitJS(t, ctx, "the serving replica", `(document.querySelector('#remote-note') || {}).textContent?.startsWith('Served by replica pylon-b.')`)
	waitJS(t, ctx, "what is not known here", `document.querySelector('#remote-note').textContent.includes('Not known here:')`)
	screenshot(t, ctx, "proxy-other-replica")

	// This replica's own proxy keeps its full page.
	goTo(t, ctx, "#/proxy/edge-2")
	waitJS(t, ctx, "the local comparison", `!!document.querySelector('table.drift tr[data-type="CDS"]') && !document.querySelector('#remote-note')`)
}

// With etcd stopped, another replica's proxy is not shown SYNCED: the
// overview counts it UNKNOWN, the list shows its types UNKNOWN with how
// old its state is, and its page says it is not current. This replica's
// own proxy keeps its state. With etcd back, all is current again.
func TestEtcdDownOtherReplicasProxiesUnknown(t *testing.T) {
	ctx := browser(t)
	a, b, srv := startReplicas(t)
	_, v := a.apply(t, document(false))
	b.waitServing(t, v)
	far := xdstest.NewProxy(t, xdstest.Dial(t, b.xdsAddr), "edge-1", false)
	near := xdstest.NewProxy(t, xdstest.Dial(t, a.xdsAddr), "edge-2", false)
	far.Settle()
	near.Settle()
	a.signIn(t, ctx, a.readToken)
	goTo(t, ctx, "#/proxies")
	waitJS(t, ctx, "edge-1 SYNCED", `!!document.querySelector('#proxies tr[data-node="edge-1"] .badge[data-state="SYNCED"]')`)

	srv.Stop()
	goTo(t, ctx, "#/overview")
	waitJS(t, ctx, "UNKNOWN in the totals", `[...document.querySelectorAll('#totals .badge')].some(b => b.textContent.startsWith('UNKNOWN ') && b.textContent !== 'UNKNOWN 0')`)
	waitJS(t, ctx, "the partial notice", `[...document.querySelectorAll('.alert.info')].some(e => e.textContent.includes('etcd unreachable'))`)
	goTo(t, ctx, "#/proxies")
	waitJS(t, ctx, "edge-1 UNKNOWN, as of some seconds ago", `(() => { const r = document.querySelector('#proxies tr[data-node="edge-1"]'); return !!r && !r.querySelector('.badge[data-state="SYNCED"]') && !!r.querySelector('.badge[data-state="UNKNOWN"]') && / as of \d+s ago/.test(r.textContent); })()`)
	waitJS(t, ctx, "edge-2 still SYNCED", `!!document.querySelector('#proxies tr[data-node="edge-2"] .badge[data-state="SYNCED"]')`)
	goTo(t, ctx, "#/proxy/edge-1")
	waitJS(t, ctx, "the not-current note", `(document.querySelector('#stale-note') || {}).textContent?.startsWith('Not current.')`)

	srv.Restart()
	goTo(t, ctx, "#/proxies")
	waitJS(t, ctx, "edge-1 SYNCED again", `!!document.querySelector('#proxies tr[data-node="edge-1"] .badge[data-state="SYNCED"]')`)
}
