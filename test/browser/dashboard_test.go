package browser

import (
	"context"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"google.golang.org/protobuf/proto"

	"github.com/pylon-xds/pylon/internal/daemon"
	"github.com/pylon-xds/pylon/internal/source/git/gittest"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// document is the test config: two groups, two services (a third with
// billing), a listener, a raw Secret holding a private key the proxies may
// receive and no page may show, and the Runtime resource the scripted
// proxies use to learn that the server has nothing more for them.
func document(billing bool) string {
	services := []string{
		`{"name": "web", "connect_timeout": "1s", "endpoints": [{"address": "127.0.0.1", "port": 8080}]}`,
		`{"name": "api", "connect_timeout": "1s", "endpoints": [{"address": "127.0.0.1", "port": 8081}]}`,
	}
	if billing {
		services = append(services, `{"name": "billing", "connect_timeout": "2s", "endpoints": [{"address": "127.0.0.1", "port": 8082}]}`)
	}
	return `{
 "groups": [{"name": "edge", "match": {"id": "edge-*"}}, {"name": "canary", "match": {"id": "canary-*"}}],
 "services": [` + strings.Join(services, ",") + `],
 "routes": [{"name": "web", "virtual_hosts": [{"name": "web", "domains": ["*"], "routes": [{"to": [{"service": "web"}]}]}]}],
 "listeners": [{"name": "public", "address": "127.0.0.1", "port": 10080, "routes": "web"}],
 "resources": [
  {"@type": "type.googleapis.com/envoy.service.runtime.v3.Runtime", "name": "xdstest-probe", "layer": {"probe": 1}},
  {"@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret", "name": "edge-key",
   "tlsCertificate": {"certificateChain": {"inlineString": "PUBLIC-CERT"}, "privateKey": {"inlineString": ` + js(markedKey()) + `}}}
 ]
}`
}

// nackReason and strayNode carry markup: text from proxies is shown as
// text, never run (window.__pwned stays unset).
const (
	nackReason = "cluster api: upstream TLS context refused <img src=x onerror=window.__pwned=1> (simulated)"
	strayNode  = "stray-<svg onload=window.__pwned=2>"
)

// fleetUnderTest is the running Pylon, its clients and the browser tab.
type fleetUnderTest struct {
	p       *pylon
	proxies map[string]*xdstest.Proxy
	ctx     context.Context
	rev1    int64
}

// TestDashboard drives every page of the dashboard against a running
// Pylon with scripted xDS proxies: the counts of the overview, a NACKing
// proxy's reason on its page, a config change showing up live, the diff
// and a rollback from the page reaching the proxies, the rollout, and no
// page showing the private key.
func TestDashboard(t *testing.T) {
	ctx := browser(t)
	p := startPylon(t, daemon.Options{})
	rev1, v1 := p.apply(t, document(false))
	conn := xdstest.Dial(t, p.xdsAddr)
	proxies := map[string]*xdstest.Proxy{}
	for _, id := range []string{"edge-1", "edge-2", "edge-3", "canary-1"} {
		proxies[id] = xdstest.NewProxy(t, conn, id, id == "edge-3")
	}
	// A proxy in no group: connected, asking, receiving nothing.
	xdstest.OpenADS(t, conn, xdstest.Node(strayNode)).Request(xdstype.ClusterURL)
	// edge-2 refuses the api cluster: its CDS is NACKED with the reason.
	proxies["edge-2"].Reject = func(m proto.Message) string {
		if c, ok := m.(*clusterv3.Cluster); ok && c.GetName() == "api" {
			return nackReason
		}
		return ""
	}
	settle(t, proxies)

	p.signIn(t, ctx, p.readToken)
	f := &fleetUnderTest{p: p, proxies: proxies, ctx: ctx, rev1: rev1}

	t.Run("overview_counts", func(t *testing.T) { f.overviewCounts(t, v1) })
	t.Run("nacked_proxy_reason", f.nackedProxy)
	t.Run("proxies_filter", f.proxiesFilter)
	t.Run("change_shows_live", f.changeLive)
	t.Run("rollout", f.rollout)
	t.Run("read_token_cannot_roll_back", f.readTokenRefused)
	t.Run("rollback_reaches_proxies", f.rollback)
	t.Run("no_page_shows_the_key", f.noKey)
}

// settle lets every proxy apply what the server has for it.
func settle(t *testing.T, proxies map[string]*xdstest.Proxy) {
	t.Helper()
	for _, id := range slices.Sorted(maps.Keys(proxies)) {
		proxies[id].Settle()
	}
}

// cell is the JavaScript reading the overview's count of group x type x
// state (0 when the cell shows none).
func cell(group, typ, state string) string {
	return `(() => { const a = document.querySelector('#groups tr[data-group=` + jsString(group) + `] td[data-type=` + jsString(typ) + `] a[title$=` + jsString(" "+state) + `]'); return a ? Number(a.dataset.count) : 0; })()`
}

func (f *fleetUnderTest) overviewCounts(t *testing.T, version string) {
	ctx := f.ctx
	goTo(t, ctx, "#/overview")
	// Served version, and per group x type x state the real streams'.
	waitJS(t, ctx, "the served version", `document.querySelector('#config-version') && document.querySelector('#config-version').title === `+jsString(version))
	for _, c := range []struct {
		group, typ, state string
		n                 int
	}{
		{"edge", "CDS", "SYNCED", 2}, {"edge", "CDS", "NACKED", 1},
		{"edge", "LDS", "SYNCED", 3}, {"canary", "CDS", "SYNCED", 1},
		{"no matching group", "CDS", "NOT SENT", 1},
	} {
		waitJS(t, ctx, c.group+" "+c.typ+" "+c.state+" = "+strconv.Itoa(c.n), cell(c.group, c.typ, c.state)+` === `+strconv.Itoa(c.n))
	}
	waitJS(t, ctx, "5 streams", `document.querySelector('#stream-count').textContent === '5'`)
	waitJS(t, ctx, "NACKED total", `[...document.querySelectorAll('#totals .badge')].some(b => b.textContent === 'NACKED 1')`)
}

func (f *fleetUnderTest) nackedProxy(t *testing.T) {
	ctx := f.ctx
	goTo(t, ctx, "#/proxy/edge-2")
	waitJS(t, ctx, "the NACK reason", `[...document.querySelectorAll('tr[data-type="CDS"] .nack-detail')].some(e => e.textContent === `+jsString(nackReason)+`)`)
	waitJS(t, ctx, "the reason as text, not markup", `!document.querySelector('.nack-detail img') && window.__pwned === undefined`)
	waitJS(t, ctx, "CDS NACKED", `!!document.querySelector('table.types tr[data-type="CDS"] .badge[data-state="NACKED"]')`)
	// The drift: it runs nothing of CDS (never ACKed) and should run the
	// group's version.
	waitJS(t, ctx, "CDS behind", `document.querySelector('table.drift tr[data-type="CDS"]').textContent.includes('behind')`)
	run(t, ctx, "show the config", chromedp.Click(chromedp.CSS(`#show-config`)))
	waitJS(t, ctx, "the config it should run", `(document.querySelector('#should-config pre') || {}).textContent?.includes('"edge-key"')`)
	waitJS(t, ctx, "the key redacted", `document.querySelector('#should-config pre').textContent.includes('[redacted]')`)
	screenshot(t, ctx, "proxy")
}

// rows is the JavaScript counting the proxies table's rows.
const rows = `document.querySelectorAll('#proxies tbody tr').length`

func (f *fleetUnderTest) proxiesFilter(t *testing.T) {
	ctx := f.ctx
	goTo(t, ctx, "#/proxies")
	waitJS(t, ctx, "5 rows", rows+` === 5`)
	screenshot(t, ctx, "proxies")
	run(t, ctx, "search", chromedp.SendKeys(chromedp.CSS(`#filter-q`), "edge"))
	waitJS(t, ctx, "3 edge rows", rows+` === 3 && document.querySelector('#match-count').textContent.startsWith('3 of 5')`)
	run(t, ctx, "state filter", eval(`(() => { const s = document.querySelector('#filter-state'); s.value = 'NACKED'; s.dispatchEvent(new Event('change')); })()`))
	waitJS(t, ctx, "only edge-2", rows+` === 1 && document.querySelector('#proxies tbody tr').dataset.node === 'edge-2'`)
	// Sorting by node, descending, on the server.
	goTo(t, ctx, "#/proxies?sort=-node")
	waitJS(t, ctx, "sorted descending", `[...document.querySelectorAll('#proxies tbody tr')].map(r => r.dataset.node).join(',') === `+jsString(strayNode+",edge-3,edge-2,edge-1,canary-1"))
	waitJS(t, ctx, "the stray's id as text", `[...document.querySelectorAll('#proxies tbody a')].some(a => a.textContent === `+jsString(strayNode)+`) && !document.querySelector('#proxies svg') && window.__pwned === undefined`)
}

func (f *fleetUnderTest) changeLive(t *testing.T) {
	ctx := f.ctx
	goTo(t, ctx, "#/overview")
	waitJS(t, ctx, "the overview", `!!document.querySelector('#groups')`)
	// A reload would lose this.
	run(t, ctx, "mark the page", eval(`window.__noReload = 42`))
	rev2, v2 := f.p.apply(t, document(true))
	settle(t, f.proxies)
	waitJS(t, ctx, "the new version, live", `document.querySelector('#config-version').title === `+jsString(v2))
	waitJS(t, ctx, "its revision", `document.querySelector('#config-revision').textContent.startsWith('revision `+strconv.FormatInt(rev2, 10)+` ')`)
	if f.proxies["edge-1"].Clusters["billing"] == nil {
		t.Fatal("edge-1 did not receive the billing cluster")
	}
	waitJS(t, ctx, "edge CDS counts after the change", cell("edge", "CDS", "SYNCED")+` === 2 && `+cell("edge", "CDS", "NACKED")+` === 1`)
	waitJS(t, ctx, "push latency shown", `!!document.querySelector('#latency tr td')`)
	waitJS(t, ctx, "no reload", `window.__noReload === 42`)
	screenshot(t, ctx, "overview")
}

func (f *fleetUnderTest) rollout(t *testing.T) {
	ctx := f.ctx
	goTo(t, ctx, "#/rollout")
	// edge-1 and edge-3 ACKed the billing change; edge-2 NACKs it.
	waitJS(t, ctx, "edge 2 of 3", `(document.querySelector('#rollout tr[data-group="edge"] td.done') || {}).textContent === '2 / 3'`)
	waitJS(t, ctx, "canary 1 of 1", `document.querySelector('#rollout tr[data-group="canary"] td.done').textContent === '1 / 1'`)
	waitJS(t, ctx, "edge-2 pending", `[...document.querySelectorAll('#pending tr[data-node]')].map(r => r.dataset.node).join(',') === 'edge-2'`)
	waitJS(t, ctx, "a line per group", `document.querySelectorAll('svg.chart polyline').length === 2`)
	screenshot(t, ctx, "rollout")
}

// openRollback opens the confirmation of a rollback to rev and confirms it
// with token.
func openRollback(t *testing.T, ctx context.Context, rev int64, token string) {
	t.Helper()
	goTo(t, ctx, "#/changes")
	sel := `button.rollback[data-revision="` + strconv.FormatInt(rev, 10) + `"]`
	waitJS(t, ctx, "the rollback button", `!!document.querySelector('`+sel+`')`)
	run(t, ctx, "roll back", chromedp.Click(chromedp.CSS(sel)), chromedp.WaitVisible(chromedp.CSS(`#rollback-token`)),
		chromedp.SendKeys(chromedp.CSS(`#rollback-token`), token), chromedp.Click(chromedp.CSS(`#rollback-confirm`)))
}

func (f *fleetUnderTest) readTokenRefused(t *testing.T) {
	ctx := f.ctx
	goTo(t, ctx, "#/changes")
	// The default diff is the newest change: billing added.
	waitJS(t, ctx, "the diff of the newest change", `(document.querySelector('#diff-text') || {}).textContent?.includes('services/billing')`)
	waitJS(t, ctx, "who wrote it", `document.querySelector('#history tbody tr').textContent.includes('write token sha256:')`)
	screenshot(t, ctx, "changes")
	openRollback(t, ctx, f.rev1, f.p.readToken)
	waitJS(t, ctx, "refused with 401", `document.querySelector('#rollback-error').textContent.startsWith('Refused (401)')`)
	run(t, ctx, "cancel", eval(`document.querySelector('#modal button').click()`))
	code, _ := f.p.call(t, f.p.readToken, "GET", "/v1/history", nil)
	if code != http.StatusOK {
		t.Fatalf("history: %d", code)
	}
	settle(t, f.proxies)
	if f.proxies["edge-1"].Clusters["billing"] == nil {
		t.Fatal("a refused rollback changed what the proxies hold")
	}
}

func (f *fleetUnderTest) rollback(t *testing.T) {
	ctx := f.ctx
	openRollback(t, ctx, f.rev1, f.p.token)
	waitJS(t, ctx, "rolled back", `(document.querySelector('#rollback-result') || {}).textContent?.startsWith('Rolled back to revision `+strconv.FormatInt(f.rev1, 10)+`.')`)
	eventually(t, "the rollback served", func() bool {
		_, s := f.p.call(t, f.p.readToken, "GET", "/config?group=edge", nil)
		return !strings.Contains(s, "billing")
	})
	settle(t, f.proxies)
	for _, id := range []string{"edge-1", "edge-3", "canary-1"} {
		if f.proxies[id].Clusters["billing"] != nil || f.proxies[id].Clusters["web"] == nil {
			t.Errorf("%s after the rollback holds %v", id, slices.Sorted(maps.Keys(f.proxies[id].Clusters)))
		}
	}
}

func (f *fleetUnderTest) noKey(t *testing.T) {
	ctx := f.ctx
	for _, page := range []struct{ hash, ready string }{
		{"#/overview", `!!document.querySelector('#groups')`},
		{"#/proxies", rows + ` === 5`},
		{"#/rollout", `!!document.querySelector('#rollout, #pending-none, .empty')`},
		{"#/changes", `!!document.querySelector('#diff-text')`},
	} {
		goTo(t, ctx, page.hash)
		waitJS(t, ctx, page.hash, page.ready)
		noKeyOnPage(t, ctx, page.hash)
	}
	// The diff that added the Secret (seed -> first apply), and the proxy
	// page with the config it should run, which holds the Secret.
	sel := `input[name="from"][value="` + strconv.FormatInt(f.rev1-1, 10) + `"]`
	run(t, ctx, "diff of the Secret", chromedp.Click(chromedp.CSS(sel)))
	waitJS(t, ctx, "the Secret in the diff", `(document.querySelector('#diff-text') || {}).textContent?.includes('edge-key')`)
	noKeyOnPage(t, ctx, "the diff adding the Secret")
	goTo(t, ctx, "#/proxy/edge-1")
	run(t, ctx, "show the config", chromedp.WaitVisible(chromedp.CSS(`#show-config`)), chromedp.Click(chromedp.CSS(`#show-config`)))
	waitJS(t, ctx, "the config with the Secret", `(document.querySelector('#should-config pre') || {}).textContent?.includes('"edge-key"')`)
	noKeyOnPage(t, ctx, "the proxy page")
}

// In file mode the changes page says the config is read-only and where it
// comes from, and offers no rollback.
func TestFileModeReadOnly(t *testing.T) {
	ctx := browser(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "pylon.json")
	if err := os.WriteFile(cfg, []byte(document(false)), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startPylon(t, daemon.Options{ConfigPath: cfg})
	p.signIn(t, ctx, p.readToken)
	goTo(t, ctx, "#/changes")
	waitJS(t, ctx, "the read-only notice", `(document.querySelector('#read-only') || {}).textContent?.startsWith('Read-only.')`)
	waitJS(t, ctx, "no rollback", `!document.querySelector('button.rollback')`)
	text := get(t, ctx, "the notice", chromedp.Evaluate[string](`document.querySelector('#read-only').textContent`))
	if !strings.Contains(text, cfg) {
		t.Errorf("the read-only notice does not name the config %s: %q", cfg, text)
	}
	screenshot(t, ctx, "changes-file-mode")
}

// With --config-git the changes page says the config is read-only and
// names the repository and the commit served.
func TestGitModeReadOnly(t *testing.T) {
	ctx := browser(t)
	repo := gittest.New(t)
	rev := repo.Commit(map[string]string{"pylon.json": document(false)})
	p := startPylon(t, daemon.Options{Git: daemon.GitOptions{URL: repo.FileURL()}})
	p.signIn(t, ctx, p.readToken)
	goTo(t, ctx, "#/changes")
	waitJS(t, ctx, "the read-only notice", `(document.querySelector('#read-only') || {}).textContent?.startsWith('Read-only.')`)
	waitJS(t, ctx, "no rollback", `!document.querySelector('button.rollback')`)
	text := get(t, ctx, "the notice", chromedp.Evaluate[string](`document.querySelector('#read-only').textContent`))
	if !strings.Contains(text, "Git repository "+repo.FileURL()+" (main, /)") || !strings.Contains(text, "at commit "+rev) {
		t.Errorf("the read-only notice does not name the repository %s and the commit %s: %q", repo.FileURL(), rev, text)
	}
}
