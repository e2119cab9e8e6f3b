package browser

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/pylon-xds/pylon/internal/daemon"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
)

// stagedDocument is document with a rollout policy on group edge: edge-1
// first (an hour's bake), then half the group.
func stagedDocument(billing bool) string {
	return strings.Replace(document(billing), `{"name": "edge", "match": {"id": "edge-*"}}`,
		`{"name": "edge", "match": {"id": "edge-*"}, "rollout": {"stages": [{"selector": {"id": "edge-1"}, "bake": "1h"}, {"share": "50%", "bake": "1h"}]}}`, 1)
}

// staged is the JavaScript reading an attribute of group edge's rollout
// card.
const stagedCard = `document.querySelector('.staged[data-group="edge"]')`

// nodesOn is the JavaScript listing the nodes shown on a version ("new",
// "previous"), comma-separated.
func nodesOn(which string) string {
	return `[...document.querySelectorAll('.staged[data-group="edge"] .version-nodes.on-` + which + ` a[data-node]')].map(a => a.dataset.node).join(',')`
}

// TestStagedRollout drives a staged rollout from the dashboard: its stage,
// bake timer and nodes per version; a halt refused to the read token; a
// halt, a resume and a promotion confirmed with the write token, each
// changing what the page shows and what the proxies run.
func TestStagedRollout(t *testing.T) {
	ctx := browser(t)
	p := startPylon(t, daemon.Options{})
	p.apply(t, stagedDocument(false))
	conn := xdstest.Dial(t, p.xdsAddr)
	proxies := map[string]*xdstest.Proxy{}
	for _, id := range []string{"edge-1", "edge-2", "edge-3", "canary-1"} {
		proxies[id] = xdstest.NewProxy(t, conn, id, id == "edge-3")
	}
	settle(t, proxies)
	p.apply(t, stagedDocument(true))
	settle(t, proxies)
	if proxies["edge-1"].Clusters["billing"] == nil || proxies["edge-2"].Clusters["billing"] != nil {
		t.Fatal("stage 1 is not edge-1 alone")
	}

	p.signIn(t, ctx, p.readToken)
	goTo(t, ctx, "#/rollout")
	waitJS(t, ctx, "edge at stage 1 of 2", stagedCard+`?.dataset.state === 'running' && `+stagedCard+`.querySelector('.pill').textContent === 'stage 1/2'`)
	waitJS(t, ctx, "the bake's time left", `/^(59m \d+s|1h 0m)$/.test(`+stagedCard+`.querySelector('.bake-left').textContent)`)
	waitJS(t, ctx, "edge-1 on the new version", nodesOn("new")+` === 'edge-1'`)
	waitJS(t, ctx, "the others on the previous one", nodesOn("previous")+` === 'edge-2,edge-3'`)
	noKeyOnPage(t, ctx, "the rollout page")
	screenshot(t, ctx, "staged-rollout")

	// The read token cannot halt it.
	rolloutAction(t, ctx, "halt", p.readToken)
	waitJS(t, ctx, "refused with 401", `document.querySelector('#rollout-error').textContent.startsWith('Refused (401)')`)
	run(t, ctx, "cancel", eval(`document.querySelector('#modal button').click()`))
	waitJS(t, ctx, "still running", stagedCard+`.dataset.state === 'running'`)

	// Halt: the stage is rolled back.
	rolloutAction(t, ctx, "halt", p.token)
	waitJS(t, ctx, "halted", stagedCard+`?.dataset.state === 'halted' && document.querySelector('#rollout-action-result').textContent.startsWith('Halt: edge.')`)
	waitJS(t, ctx, "the halt's reason", stagedCard+`.textContent.includes('Halted at stage 1 of 2 (operator)') && `+stagedCard+`.querySelector('.halt-detail').textContent === 'halted through the admin API'`)
	settle(t, proxies)
	if proxies["edge-1"].Clusters["billing"] != nil {
		t.Fatal("a halt did not roll edge-1 back")
	}
	waitJS(t, ctx, "every node on the previous version", nodesOn("previous")+` === 'edge-1,edge-2,edge-3' && `+nodesOn("new")+` === ''`)
	waitJS(t, ctx, "resume and supersede offered", `!!`+stagedCard+`.querySelector('button[data-action="resume"]') && !`+stagedCard+`.querySelector('button[data-action="halt"]')`)
	screenshot(t, ctx, "staged-rollout-halted")

	// Resume: stage 1 again.
	rolloutAction(t, ctx, "resume", p.token)
	waitJS(t, ctx, "running again", stagedCard+`?.dataset.state === 'running' && `+stagedCard+`.querySelector('.pill').textContent === 'stage 1/2'`)
	settle(t, proxies)
	waitJS(t, ctx, "edge-1 on the new version again", nodesOn("new")+` === 'edge-1'`)

	// Promote: stage 2, half of the group.
	rolloutAction(t, ctx, "promote", p.token)
	waitJS(t, ctx, "stage 2", stagedCard+`?.querySelector('.pill').textContent === 'stage 2/2'`)
	settle(t, proxies)
	var want []string
	for _, id := range []string{"edge-1", "edge-2", "edge-3"} {
		if proxies[id].Clusters["billing"] != nil {
			want = append(want, id)
		}
	}
	waitJS(t, ctx, "the nodes of stage 2 on the new version", nodesOn("new")+` === `+jsString(strings.Join(want, ",")))
}

// rolloutAction clicks group edge's action button and confirms it with
// token.
func rolloutAction(t *testing.T, ctx context.Context, action, token string) {
	t.Helper()
	sel := `.staged[data-group="edge"] button[data-action="` + action + `"]`
	waitJS(t, ctx, "the "+action+" button", `!!document.querySelector('`+sel+`')`)
	run(t, ctx, action, chromedp.Click(chromedp.CSS(sel)), chromedp.WaitVisible(chromedp.CSS(`#rollout-token`)),
		chromedp.SendKeys(chromedp.CSS(`#rollout-token`), token), chromedp.Click(chromedp.CSS(`#rollout-confirm`)))
}
