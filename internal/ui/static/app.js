// Pylon's fleet dashboard. Vanilla JavaScript, no build step.
//
// Every datum comes from the admin API, called with the token the operator
// typed in (sessionStorage of this tab, sent as Authorization: Bearer).
// Text from proxies and from the config is untrusted: it is only ever set
// as textContent (the el() helper below), never parsed as HTML.
'use strict';

(function () {
  const TOKEN_KEY = 'pylon.token';
  // Polling: every POLL_MS while the tab is visible (SLOW_MS for pages whose
  // reads are heavier: a proxy's dump, the store's history), HIDDEN_MS when
  // it is not; on errors the interval doubles up to MAX_BACKOFF_MS.
  const POLL_MS = 2000, SLOW_MS = 5000, HIDDEN_MS = 15000, MAX_BACKOFF_MS = 30000;
  const STATES = ['SYNCED', 'STALE', 'NACKED', 'NOT SENT'];
  // UNKNOWN: another replica's proxies while etcd cannot be read; shown
  // only when some are.
  const ALL_STATES = STATES.concat(['UNKNOWN']);

  const $ = (id) => document.getElementById(id);

  // el builds an element: attrs are set as attributes (or properties for
  // on* handlers), children are nodes or strings (text nodes).
  function el(tag, attrs, ...children) {
    const svg = ['svg', 'polyline', 'line', 'text', 'g', 'rect', 'circle', 'title'].includes(tag);
    const e = svg ? document.createElementNS('http://www.w3.org/2000/svg', tag) : document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
      else if (k === 'class') e.setAttribute('class', v);
      else e.setAttribute(k, v === true ? '' : String(v));
    }
    for (const c of children.flat(Infinity)) {
      if (c === undefined || c === null || c === false) continue;
      e.appendChild(typeof c === 'object' ? c : document.createTextNode(String(c)));
    }
    return e;
  }

  function token() { return sessionStorage.getItem(TOKEN_KEY) || ''; }

  // ApiError carries the HTTP status and the API's error text.
  class ApiError extends Error {
    constructor(status, message) { super(message); this.status = status; }
  }

  async function api(path, opts) {
    opts = opts || {};
    const headers = { 'Accept': 'application/json', 'Authorization': 'Bearer ' + (opts.token || token()) };
    const resp = await fetch(path, { method: opts.method || 'GET', headers, cache: 'no-store', credentials: 'omit', referrerPolicy: 'no-referrer' });
    let body = null;
    try { body = await resp.json(); } catch (e) { body = null; }
    if (!resp.ok) {
      const msg = (body && body.error) || (resp.status + ' ' + resp.statusText);
      throw new ApiError(resp.status, msg);
    }
    return body;
  }

  // ---- formatting ----
  // known says whether a time was recorded: Go writes an unset time as
  // year 1, which is not a time anything happened.
  function known(t) { return !!t && new Date(t).getUTCFullYear() > 1; }
  function ago(t) {
    if (!known(t)) return '';
    const s = Math.max(0, (Date.now() - new Date(t).getTime()) / 1000);
    if (s < 60) return Math.floor(s) + 's ago';
    if (s < 3600) return Math.floor(s / 60) + 'm ago';
    if (s < 86400) return Math.floor(s / 3600) + 'h ago';
    return Math.floor(s / 86400) + 'd ago';
  }
  function when(t) {
    if (!known(t)) return el('span', { class: 'muted' }, '—');
    return el('span', { title: new Date(t).toISOString() }, ago(t));
  }
  function short(v) { return v ? (v.length > 12 ? v.slice(0, 12) : v) : '—'; }
  function version(v) { return el('span', { class: 'mono', title: v || '' }, short(v)); }
  function fmtMs(x) { return x < 1 ? x.toFixed(2) + ' ms' : x < 1000 ? x.toFixed(1) + ' ms' : (x / 1000).toFixed(2) + ' s'; }
  function num(n) { return Number(n || 0).toLocaleString('en-US'); }
  function plural(n, word) { return num(n) + ' ' + word + (n === 1 ? '' : 's'); }
  function badge(state, text) {
    return el('span', { class: 'badge ' + state.replace(' ', '-'), 'data-state': state }, text === undefined ? state : text);
  }

  // ---- live status indicator and polling ----
  const live = { timer: null, failures: 0, view: null, gen: 0 };

  function setLive(ok, text) {
    const l = $('live');
    l.className = 'live ' + (ok ? 'ok' : 'err');
    l.textContent = text;
  }

  function schedule() {
    clearTimeout(live.timer);
    const base = document.hidden ? HIDDEN_MS : (live.view && live.view.interval) || POLL_MS;
    const delay = live.failures ? Math.min(MAX_BACKOFF_MS, base * Math.pow(2, live.failures)) : base;
    live.timer = setTimeout(refresh, delay);
  }

  async function refresh() {
    const gen = live.gen, view = live.view;
    if (!view || !view.poll) return;
    try {
      await view.poll();
      if (gen !== live.gen) return;
      live.failures = 0;
      setLive(true, 'live · ' + new Date().toLocaleTimeString('en-GB'));
    } catch (e) {
      if (gen !== live.gen) return;
      if (e.status === 401) { signIn(e.message); return; }
      live.failures = Math.min(live.failures + 1, 8);
      setLive(false, 'retrying: ' + e.message);
    }
    schedule();
  }

  // ---- router ----
  function parseHash() {
    const h = location.hash.replace(/^#\/?/, '');
    const [path, query] = h.split('?');
    const parts = path.split('/');
    return { name: parts[0] || 'overview', arg: parts.slice(1).join('/'), params: new URLSearchParams(query || '') };
  }

  const views = { overview: overviewView, proxies: proxiesView, proxy: proxyView, changes: changesView, rollout: rolloutView };

  function route() {
    if (!token()) { signIn(''); return; }
    $('signin').hidden = true;
    $('signout').hidden = false;
    const r = parseHash();
    const make = views[r.name] || overviewView;
    for (const a of document.querySelectorAll('#nav a')) {
      a.classList.toggle('active', a.dataset.view === (r.name === 'proxy' ? 'proxies' : r.name));
    }
    live.gen++;
    live.failures = 0;
    clearTimeout(live.timer);
    const root = $('view');
    root.replaceChildren(el('p', { class: 'muted' }, 'Loading…'));
    live.view = make(root, r);
    refresh();
  }

  function signIn(message) {
    clearTimeout(live.timer);
    live.view = null;
    sessionStorage.removeItem(TOKEN_KEY);
    $('signin').hidden = false;
    $('signout').hidden = true;
    const err = $('signin-error');
    err.hidden = !message;
    err.textContent = message ? 'Refused: ' + message : '';
    setLive(false, 'signed out');
    $('token').focus();
  }

  // ---- overview ----
  function overviewView(root) {
    // The store revision of the running version, looked up in the history
    // only when the version changes (a history read is a store read).
    const rev = { version: null, revision: null };
    return {
      poll: async () => {
        const s = await api('/summary');
        $('replica').textContent = s.identifier ? 'replica ' + s.identifier : '';
        const v = (s.config || {}).version;
        if (s.mode === 'store' && v && v !== rev.version) {
          try {
            const h = await api('/v1/history');
            const e = (h.history || []).find((x) => x.version === v);
            rev.version = v;
            rev.revision = e ? e.revision : null;
          } catch (e) {
            // The store unreachable (the summary says degraded, and why):
            // the overview shows without the revision, tried again next poll.
            if (e.status === 401) throw e;
          }
        }
        s.revision = s.mode === 'store' && rev.version === v ? rev.revision : null;
        root.replaceChildren(renderOverview(s));
      },
    };
  }

  function renderOverview(s) {
    const cfg = s.config || {};
    const totals = s.totals || {};
    const stateTotal = (st) => Object.values(totals).reduce((n, m) => n + (m[st] || 0), 0);
    const cards = el('div', { class: 'grid cols-4' },
      el('div', { class: 'card stat' }, el('div', { class: 'label' }, 'Running config'),
        el('div', { class: 'value mono', id: 'config-version', title: cfg.version || '' }, short(cfg.version)),
        el('div', { class: 'sub', id: 'config-revision' }, s.revision ? 'revision ' + s.revision + ' · ' : '', 'published ', when(cfg.publishedAt), s.mode === 'file' ? ' · file mode' : ' · store mode')),
      el('div', { class: 'card stat' }, el('div', { class: 'label' }, 'Proxy streams'),
        el('div', { class: 'value', id: 'stream-count' }, num(s.streams)),
        el('div', { class: 'sub' }, num(s.nodes) + ' nodes · ' + num(s.gone) + ' recently closed')),
      el('div', { class: 'card stat' }, el('div', { class: 'label' }, 'Types by state'),
        el('div', { class: 'count', id: 'totals' }, ALL_STATES.filter((st) => st !== 'UNKNOWN' || stateTotal(st)).map((st) => el('a', { href: '#/proxies?state=' + encodeURIComponent(st), title: st }, badge(st, st + ' ' + num(stateTotal(st)))))),
        el('div', { class: 'sub' }, 'per proxy stream and resource type')),
      el('div', { class: 'card stat' }, el('div', { class: 'label' }, 'Pylon'),
        el('div', { class: 'value' }, s.degraded ? el('span', { class: 'error' }, 'degraded') : 'serving'),
        el('div', { class: 'sub' }, (s.pylonVersion || '') + (s.replicas.length > 1 ? ' · ' + s.replicas.length + ' replicas' : ''))));
    const parts = [el('h1', {}, 'Fleet overview'), cards];
    if (s.degraded) parts.push(el('div', { class: 'card alert section' }, el('strong', {}, 'Config store unreachable'), el('pre', {}, s.reason || '')));
    if (s.partial) parts.push(el('div', { class: 'card alert info section' }, el('strong', {}, 'Partial list: '), s.partial));
    parts.push(refusedCard(cfg.refused));
    if ((cfg.warnings || []).length) parts.push(warningsCard(cfg));
    parts.push(el('div', { class: 'grid cols-2 section' }, groupsCard(s), latencyCard(s.latency || [])));
    if (s.replicas.length > 1) parts.push(replicasCard(s.replicas));
    return el('div', {}, parts);
  }

  // diagText is a diagnostic's place (file:line, object, field) and
  // message, for a refusal and a warning alike.
  function diagText(d) {
    const file = d.file ? d.file + (d.line ? ':' + d.line : '') : '';
    const object = d.type ? d.type + (d.name ? ' "' + d.name + '"' : '') : d.name;
    return [file, object, d.field].filter(Boolean).join(' · ') + ': ' + (d.message || '');
  }

  function refusedCard(r) {
    if (!r) {
      return el('div', { class: 'card alert ok section', id: 'refused' }, el('strong', {}, 'No refused change. '), el('span', { class: 'muted' }, 'The newest config change was accepted.'));
    }
    const diags = (r.diagnostics || []).map((d) => el('li', {}, diagText(d)));
    if (r.diagnosticsTotal > diags.length) {
      diags.push(el('li', { class: 'muted' }, `… and ${r.diagnosticsTotal - diags.length} more`));
    }
    return el('div', { class: 'card alert section', id: 'refused' },
      el('strong', {}, 'Last refused change '), when(r.at), el('span', { class: 'muted' }, ' — the previous config keeps serving'),
      el('pre', { class: 'error-text' }, r.error || ''), diags.length ? el('ul', {}, diags) : null);
  }

  // warningsCard lists what the served config was accepted with but an
  // operator should hear of (a route to a service with no endpoints): the
  // first the server keeps (50), and how many more there are.
  function warningsCard(cfg) {
    const list = cfg.warnings;
    const total = Math.max(cfg.warningsTotal || 0, list.length);
    const more = total > list.length ? el('li', { class: 'muted' }, '… and ' + (total - list.length) + ' more') : null;
    return el('div', { class: 'card alert warn section', id: 'warnings' },
      el('strong', {}, plural(total, 'config warning')), ' ',
      el('span', { class: 'muted' }, '— version ' + short(cfg.version) + ' is served; these do not stop it, but traffic may not go where meant'),
      el('ul', {}, list.map((d) => el('li', {}, diagText(d))), more));
  }

  function groupsCard(s) {
    const types = s.types || [];
    const head = el('tr', {}, el('th', {}, 'Group'), el('th', {}, 'Version'), el('th', { class: 'num' }, 'Streams'), types.map((t) => el('th', {}, t)));
    const rows = (s.groups || []).map((g) => el('tr', { 'data-group': g.name },
      el('td', {}, el('a', { href: '#/proxies?group=' + encodeURIComponent(g.name) }, g.name)),
      el('td', {}, version(g.version)),
      el('td', { class: 'num' }, num(g.streams)),
      types.map((t) => el('td', { 'data-type': t }, stateCounts(g.name, t, (g.states || {})[t] || {})))));
    return el('div', { class: 'card' }, el('h2', {}, 'Proxies by group and state'),
      el('p', { class: 'muted legend' }, 'Streams per resource type in each state:', STATES.map((st) => badge(st))),
      rows.length ? el('table', { id: 'groups' }, el('thead', {}, head), el('tbody', {}, rows)) : el('p', { class: 'empty' }, 'No group yet.'));
  }

  function stateCounts(group, type, counts) {
    const shown = ALL_STATES.filter((st) => counts[st]);
    if (!shown.length) return el('span', { class: 'zero' }, '—');
    return el('span', { class: 'count' }, shown.map((st) => el('a', {
      href: '#/proxies?group=' + encodeURIComponent(group) + '&type=' + encodeURIComponent(type) + '&state=' + encodeURIComponent(st),
      title: counts[st] + ' ' + type + ' ' + st, 'data-count': counts[st],
    }, badge(st, num(counts[st])))));
  }

  function latencyCard(lat) {
    const rows = lat.map((l) => el('tr', {}, el('td', {}, l.type), el('td', { class: 'num' }, fmtMs(l.p50Ms)), el('td', { class: 'num' }, fmtMs(l.p90Ms)),
      el('td', { class: 'num' }, fmtMs(l.p99Ms)), el('td', { class: 'num' }, fmtMs(l.maxMs)), el('td', { class: 'num' }, num(l.window))));
    return el('div', { class: 'card' }, el('h2', {}, 'Push latency'),
      el('p', { class: 'muted' }, 'From a change being accepted to each proxy\'s first ACK of it; the newest samples per type.'),
      rows.length ? el('table', { id: 'latency' }, el('thead', {}, el('tr', {}, ['Type', 'p50', 'p90', 'p99', 'max', 'samples'].map((h, i) => el('th', { class: i ? 'num' : '' }, h)))), el('tbody', {}, rows))
        : el('p', { class: 'empty' }, 'No change pushed since this replica started.'));
  }

  function replicasCard(reps) {
    return el('div', { class: 'card section' }, el('h2', {}, 'Replicas'),
      el('table', {}, el('thead', {}, el('tr', {}, el('th', {}, 'Replica'), el('th', { class: 'num' }, 'Streams'))),
        el('tbody', {}, reps.map((r) => el('tr', {}, el('td', {}, el('a', { href: '#/proxies?replica=' + encodeURIComponent(r.name) }, r.name)), el('td', { class: 'num' }, num(r.streams)))))));
  }

  // ---- proxies ----
  function proxiesView(root, r) {
    const p = r.params;
    const q = { q: p.get('q') || '', group: p.get('group') || '', state: p.get('state') || '', type: p.get('type') || '',
      replica: p.get('replica') || '', sort: p.get('sort') || 'node', offset: Number(p.get('offset') || 0), limit: 50 };
    let summary = null;
    const table = el('div', { id: 'proxies-table' });
    const search = el('input', { type: 'search', id: 'filter-q', placeholder: 'Search node, cluster or identity', value: q.q });
    const groupSel = el('select', { id: 'filter-group' }, el('option', { value: '' }, 'All groups'));
    const stateSel = el('select', { id: 'filter-state' }, el('option', { value: '' }, 'Any state'), ALL_STATES.concat(['DISCONNECTED']).map((s) => el('option', { value: s }, s)));
    const typeSel = el('select', { id: 'filter-type' }, el('option', { value: '' }, 'Any type'));
    stateSel.value = q.state;
    let debounce = null;
    const apply = () => { q.offset = 0; load(); };
    search.addEventListener('input', () => { q.q = search.value; clearTimeout(debounce); debounce = setTimeout(apply, 200); });
    groupSel.addEventListener('change', () => { q.group = groupSel.value; apply(); });
    stateSel.addEventListener('change', () => { q.state = stateSel.value; apply(); });
    typeSel.addEventListener('change', () => { q.type = typeSel.value; apply(); });
    root.replaceChildren(el('h1', {}, 'Proxies'), el('div', { class: 'card' },
      el('div', { class: 'toolbar' }, search, groupSel, stateSel, typeSel, el('span', { id: 'match-count', class: 'muted' })), table));

    function fillSelect(sel, values, current, all) {
      const want = [''].concat(values);
      const have = Array.from(sel.options).map((o) => o.value);
      if (want.join('\u0000') !== have.join('\u0000')) {
        sel.replaceChildren(el('option', { value: '' }, all), values.map((v) => el('option', { value: v }, v)));
      }
      sel.value = current;
    }

    async function load() {
      const gen = live.gen;
      const qs = new URLSearchParams();
      for (const k of ['q', 'group', 'state', 'type', 'replica', 'sort']) if (q[k]) qs.set(k, q[k]);
      if (q.offset) qs.set('offset', q.offset);
      history.replaceState(null, '', '#/proxies' + (qs.toString() ? '?' + qs : ''));
      qs.set('limit', q.limit);
      qs.set('offset', q.offset);
      const [page, sum] = await Promise.all([api('/proxies?' + qs), summary ? Promise.resolve(summary) : api('/summary')]);
      if (gen !== live.gen) return;
      summary = sum;
      fillSelect(groupSel, (sum.groups || []).map((g) => g.name), q.group, 'All groups');
      fillSelect(typeSel, sum.types || [], q.type, 'Any type');
      $('match-count').textContent = num(page.total) + ' of ' + num(page.all) + ' streams';
      table.replaceChildren(renderProxies(page, sum, q, load));
    }
    return { poll: async () => { summary = null; await load(); } };
  }

  function renderProxies(page, sum, q, reload) {
    const types = sum.types || [];
    const multi = (sum.replicas || []).length > 1;
    const cols = [['node', 'Node'], ['group', 'Group']].concat(multi ? [['replica', 'Replica']] : [], [[null, 'Client'], ['kind', 'Kind'], ['since', 'Connected'], ['state', 'State per type']]);
    const head = el('tr', {}, cols.map(([key, label]) => {
      if (!key) return el('th', {}, label);
      const cur = q.sort.replace(/^-/, '');
      const cls = 'sortable' + (cur === key ? (q.sort.startsWith('-') ? ' sorted-desc' : ' sorted-asc') : '');
      return el('th', { class: cls, 'data-sort': key, onclick: () => { q.sort = q.sort === key ? '-' + key : key; q.offset = 0; reload(); } }, label);
    }));
    const rows = page.streams.map((s) => {
      const byType = {};
      for (const t of s.types || []) byType[t.type] = t.state;
      const states = s.disconnectedAt ? [badge('DISCONNECTED')]
        : s.stale ? [el('span', { class: 'stale-note', title: 'etcd cannot be read: ' + s.replica + '\'s proxies as last read ' + s.ageSeconds + 's ago' }, types.filter((t) => byType[t]).map((t) => badge('UNKNOWN', t + ' UNKNOWN')), ' as of ' + s.ageSeconds + 's ago')]
        : types.filter((t) => byType[t]).map((t) => badge(byType[t], t + ' ' + byType[t]));
      return el('tr', { class: 'clickable', 'data-node': s.node, onclick: () => { location.hash = '#/proxy/' + encodeURIComponent(s.node); } },
        el('td', {}, el('a', { href: '#/proxy/' + encodeURIComponent(s.node), class: 'mono' }, s.node)),
        el('td', {}, s.group),
        multi ? el('td', {}, s.replica) : null,
        el('td', { class: 'muted' }, s.client || ''),
        el('td', { class: 'nowrap' }, /delta/.test(s.kind) ? s.kind : s.kind + ' SotW'),
        el('td', { class: 'nowrap' }, when(s.connectedSince)),
        el('td', {}, states));
    });
    const last = Math.min(page.offset + page.limit, page.total);
    const pager = el('div', { class: 'pager' },
      el('span', { class: 'muted', id: 'page-range' }, page.total ? num(page.offset + 1) + '–' + num(last) + ' of ' + num(page.total) : ''),
      el('button', { type: 'button', id: 'page-prev', disabled: page.offset === 0, onclick: () => { q.offset = Math.max(0, q.offset - q.limit); reload(); } }, '‹ Previous'),
      el('button', { type: 'button', id: 'page-next', disabled: last >= page.total, onclick: () => { q.offset += q.limit; reload(); } }, 'Next ›'));
    return el('div', {}, el('table', { id: 'proxies' }, el('thead', {}, head), el('tbody', {}, rows)),
      rows.length ? null : el('p', { class: 'empty' }, 'No proxy matches.'), pager);
  }

  // ---- one proxy ----
  function proxyView(root, r) {
    const node = decodeURIComponent(r.arg);
    let configShown = null;
    return {
      interval: SLOW_MS,
      poll: async () => {
        let d;
        try {
          d = await api('/proxies/' + encodeURIComponent(node));
        } catch (e) {
          if (e.status !== 404) throw e;
          root.replaceChildren(el('h1', {}, 'Proxy ', el('span', { class: 'mono' }, node)), el('div', { class: 'card alert info' }, 'No stream of this node is connected or recently closed.'));
          return;
        }
        const streams = d.streams || [];
        const group = streams.length ? streams[0].group : '';
        const cfgBox = el('div', { id: 'should-config' });
        const btn = el('button', { type: 'button', id: 'show-config', onclick: async () => {
          configShown = configShown ? null : await api('/config?group=' + encodeURIComponent(group));
          renderConfig(cfgBox, configShown);
        } }, 'Show the config it should run');
        renderConfig(cfgBox, configShown);
        // replaceChildren stringifies arrays and null: one element.
        root.replaceChildren(el('div', {}, el('h1', {}, 'Proxy ', el('span', { class: 'mono', id: 'proxy-node' }, node)),
          d.partial ? el('div', { class: 'card alert info' }, d.partial) : null,
          streams.map(renderStream),
          el('div', { class: 'card section' }, el('h2', {}, 'The config it should run'),
            el('p', { class: 'muted' }, 'Group ', el('strong', {}, group), '\'s resources as published now, secrets redacted.'), btn, cfgBox)));
      },
    };
  }

  function renderConfig(box, cfg) {
    if (!cfg) { box.replaceChildren(); return; }
    box.replaceChildren(el('pre', { class: 'block' }, JSON.stringify(cfg, null, 2)));
  }

  function resourceName(r) { return r.name || r.cluster_name || '(unnamed)'; }

  function renderStream(s) {
    if (s.remote) return renderRemoteStream(s);
    const facts = [['Group', s.group], ['Replica', s.replica], ['Kind', s.kind], ['Client', s.client], ['Cluster', s.cluster], ['Address', s.address],
      ['Identity', s.identity], ['Connected', s.connectedSince ? new Date(s.connectedSince).toISOString() + ' (' + ago(s.connectedSince) + ')' : ''],
      ['Disconnected', s.disconnectedAt ? ago(s.disconnectedAt) : ''], ['Stream', s.stream]].filter(([, v]) => v !== undefined && v !== '' && v !== null);
    const drift = {};
    for (const d of s.drift || []) drift[d.type] = d;
    const rows = (s.types || []).map((t) => el('tr', { 'data-type': t.type },
      el('td', {}, el('strong', {}, t.type)),
      el('td', {}, badge(t.state)),
      el('td', {}, t.sent ? [version(t.sent.version), ' ', when(t.sent.at), el('div', { class: 'muted' }, plural(t.sent.resources || 0, 'resource'))] : el('span', { class: 'muted' }, 'nothing yet')),
      el('td', {}, t.acked ? [version(t.acked.version), ' ', when(t.acked.at)] : el('span', { class: 'muted' }, '—')),
      el('td', {}, version(t.expectedVersion)),
      el('td', { class: 'nack' }, t.lastNack ? [el('div', {}, 'version ', version(t.lastNack.version), ' ', when(t.lastNack.at)), el('div', { class: 'error-text nack-detail' }, t.lastNack.errorDetail)] : el('span', { class: 'muted' }, 'none'))));
    const sent = Object.entries(s.lastSent || {}).map(([typ, res]) => el('div', { class: 'names' }, el('strong', {}, typ + ': '), res.map((x) => el('span', { class: 'mono' }, resourceName(x)))));
    return el('div', { class: 'card stream section', 'data-stream': s.stream },
      s.refused ? el('div', { class: 'card alert' }, el('strong', {}, 'Refused by Pylon: ' + s.refused.reason), el('pre', {}, s.refused.detail)) : null,
      el('dl', { class: 'kv' }, facts.map(([k, v]) => [el('dt', {}, k), el('dd', {}, String(v))])),
      el('h3', {}, 'Per type'),
      el('table', { class: 'types' }, el('thead', {}, el('tr', {}, ['Type', 'State', 'Last sent', 'ACKed (runs)', 'Should run', 'Last NACK'].map((h) => el('th', {}, h)))), el('tbody', {}, rows)),
      el('h3', {}, 'What it runs against what it should'), renderDrift(s),
      sent.length ? [el('h3', {}, 'Last sent, per type'), sent] : null);
  }

  // renderRemoteStream shows a stream another replica serves: what that
  // replica publishes of it (its types' states, the versions sent and
  // ACKed, the last NACK), and says what stays on that replica rather
  // than showing it as zero.
  function renderRemoteStream(s) {
    const facts = [['Served by', 'replica ' + s.replica], ['Group', s.group], ['Kind', s.kind], ['Cluster', s.cluster],
      ['Connected', known(s.connectedSince) ? new Date(s.connectedSince).toISOString() + ' (' + ago(s.connectedSince) + ')' : '']].filter(([, v]) => v);
    const rows = (s.types || []).map((t) => el('tr', { 'data-type': t.type },
      el('td', {}, el('strong', {}, t.type)),
      el('td', {}, badge(t.state)),
      el('td', {}, t.sent ? version(t.sent.version) : el('span', { class: 'muted' }, 'nothing yet')),
      el('td', {}, t.acked ? version(t.acked.version) : el('span', { class: 'muted' }, '—')),
      el('td', { class: 'nack' }, t.lastNack ? [el('div', {}, 'version ', version(t.lastNack.version), ' ', when(t.lastNack.at)), el('div', { class: 'error-text nack-detail' }, t.lastNack.errorDetail)] : el('span', { class: 'muted' }, 'none'))));
    return el('div', { class: 'card stream section remote', 'data-replica': s.replica },
      el('div', { class: 'card alert info', id: 'remote-note' }, el('strong', {}, 'Served by replica ' + s.replica + '. '),
        'This page shows what ' + s.replica + ' publishes of its proxies every few seconds: each type\'s state, the versions sent and ACKed, the last NACK. ',
        'Not known here: when each response was sent and how many resources it carried, the stream\'s address, client and identity, what it was last sent, and so whether it runs what it should. Open ' + s.replica + '\'s dashboard for those.'),
      s.stale ? el('div', { class: 'card alert', id: 'stale-note' }, el('strong', {}, 'Not current. '),
        'etcd cannot be read, so this is what ' + s.replica + ' published ' + s.ageSeconds + 's ago; the proxy may have changed state since.') : null,
      el('dl', { class: 'kv' }, facts.map(([k, v]) => [el('dt', {}, k), el('dd', {}, String(v))])),
      el('h3', {}, (s.stale ? 'Per type, as ' + s.replica + ' last reported it ' + s.ageSeconds + 's ago' : 'Per type, as ' + s.replica + ' reports it')),
      el('table', { class: 'types' }, el('thead', {}, el('tr', {}, ['Type', 'State', 'Last sent', 'ACKed (runs)', 'Last NACK'].map((h) => el('th', {}, h)))), el('tbody', {}, rows)));
  }

  // renderDrift says, per type, whether the proxy runs what it should and,
  // when not, what differs: the resources of the last response that
  // changed or left the group since, those not sent yet, or a refusal.
  function renderDrift(s) {
    const list = s.drift || [];
    if (!list.length) return el('p', { class: 'muted' }, 'Nothing to compare (not kept for another replica\'s proxies: ask that replica).');
    const states = {};
    for (const t of s.types || []) states[t.type] = t;
    return el('table', { class: 'drift' }, el('thead', {}, el('tr', {}, ['Type', 'Runs (ACKed)', 'Should run', '', 'Difference'].map((h) => el('th', {}, h)))),
      el('tbody', {}, list.map((d) => {
        const t = states[d.type] || {};
        const diffs = [];
        const names = (label, xs) => xs && xs.length ? diffs.push(el('div', { class: 'names' }, label + ': ', xs.map((n) => el('span', { class: 'mono' }, n)))) : null;
        if (t.state === 'NACKED' && t.lastNack) diffs.push(el('div', { class: 'error-text' }, 'refused version ', version(t.lastNack.version), ': see its last NACK above'));
        else if (!d.runs && !d.inSync) diffs.push(el('div', {}, t.sent ? 'has not ACKed what it was sent yet' : 'nothing sent yet'));
        else if (!d.inSync && t.sent && t.sent.version !== d.runs) diffs.push(el('div', {}, 'version ', version(t.sent.version), ' sent, not ACKed yet'));
        names('changed since sent', d.changed);
        names('no longer in the group', d.removed);
        names('not sent yet', d.missing);
        if (d.more) diffs.push(el('div', { class: 'muted' }, '… and ' + d.more + ' more'));
        if (!diffs.length) diffs.push(el('span', { class: 'muted' }, d.inSync ? 'none: the last response (' + plural(d.carried, 'resource') + ') is what the group has' : 'the version differs; the last response\'s resources match the group\'s'));
        return el('tr', { 'data-type': d.type }, el('td', {}, d.type), el('td', {}, version(d.runs)), el('td', {}, version(d.should)),
          el('td', {}, d.inSync ? badge('SYNCED', 'in sync') : badge('STALE', 'behind')), el('td', {}, diffs));
      })));
  }

  // ---- changes ----
  function changesView(root) {
    const sel = { from: 0, to: 0 };
    let diffBox = el('div', { id: 'diff' });
    let lastHist = '';
    let notice = el('div', { id: 'rollback-result' });
    return {
      interval: SLOW_MS,
      poll: async () => {
        const sum = await api('/summary');
        if (sum.mode === 'git') {
          root.replaceChildren(el('h1', {}, 'Changes'), el('div', { class: 'card alert info', id: 'read-only' },
            el('strong', {}, 'Read-only. '), 'This Pylon serves the config of the Git repository ', el('code', {}, sum.configPath || '(given with --config-git)'),
            ' at commit ', el('code', {}, (sum.config && sum.config.revision) || '(none yet)'),
            '; push to it to change the config. Its history is the repository\'s.'));
          return;
        }
        if (sum.mode === 'file') {
          root.replaceChildren(el('h1', {}, 'Changes'), el('div', { class: 'card alert info', id: 'read-only' },
            el('strong', {}, 'Read-only. '), 'This Pylon serves the config file ', el('code', {}, sum.configPath || '(given with --config)'),
            '; change that file to change the config. History, diff and rollback need the store (run without --config).'));
          return;
        }
        const h = await api('/v1/history');
        const hist = h.history || [];
        const key = JSON.stringify(hist.map((e) => [e.revision, e.by]));
        if (key === lastHist) return;
        lastHist = key;
        if (hist.length && !sel.to) { sel.to = hist[0].revision; sel.from = hist.length > 1 ? hist[1].revision : hist[0].revision; }
        root.replaceChildren(el('h1', {}, 'Changes'), notice, renderHistory(hist, sel, diffBox, notice),
          el('div', { class: 'card section' }, el('h2', {}, 'Difference'), diffBox));
        if (!diffBox.childNodes.length && sel.from && sel.to) showDiff(diffBox, sel);
      },
    };
  }

  function renderHistory(hist, sel, diffBox, notice) {
    const current = hist.length ? hist[0].revision : 0;
    const radio = (name, rev) => {
      const r = el('input', { type: 'radio', name, value: rev, checked: sel[name] === rev, 'aria-label': name + ' revision ' + rev });
      r.addEventListener('change', () => { sel[name] = rev; showDiff(diffBox, sel); });
      return r;
    };
    const rows = hist.map((e) => el('tr', { 'data-revision': e.revision },
      el('td', { class: 'num' }, el('strong', {}, String(e.revision)), e.revision === current ? el('div', { class: 'pill' }, 'current') : null),
      el('td', { class: 'nowrap' }, el('span', { title: e.at }, new Date(e.at).toLocaleString('en-GB')), el('div', { class: 'muted' }, ago(e.at))),
      el('td', {}, e.by || el('span', { class: 'muted', title: 'written before this replica started, or through another replica' }, 'not recorded')),
      el('td', {}, e.summary),
      el('td', {}, version(e.version)),
      el('td', {}, radio('from', e.revision)), el('td', {}, radio('to', e.revision)),
      el('td', { class: 'right' }, e.revision === current ? null : el('button', { type: 'button', class: 'rollback', 'data-revision': e.revision, onclick: () => confirmRollback(e, notice) }, 'Roll back to this'))));
    return el('div', { class: 'card' }, el('h2', {}, 'History'),
      el('table', { id: 'history' }, el('thead', {}, el('tr', {}, ['Rev', 'When', 'By', 'Change', 'Version', 'From', 'To', ''].map((x) => el('th', {}, x)))), el('tbody', {}, rows)));
  }

  async function showDiff(box, sel) {
    box.replaceChildren(el('p', { class: 'muted' }, 'Loading the difference…'));
    try {
      const d = await api('/v1/diff?from=' + sel.from + '&to=' + sel.to);
      const lines = (d.diff || '').split('\n').filter((l, i, a) => l !== '' || i < a.length - 1);
      box.replaceChildren(el('p', { class: 'muted' }, 'Revision ' + d.from + ' → revision ' + d.to + ': the stored objects as YAML, secrets redacted.'),
        lines.length ? el('pre', { class: 'diff', id: 'diff-text' }, lines.map((l) => el('span', {
          class: l.startsWith('+++') || l.startsWith('---') ? 'head' : l.startsWith('@@') ? 'hunk' : l.startsWith('+') ? 'add' : l.startsWith('-') ? 'del' : '',
        }, l || ' '))) : el('p', { class: 'empty', id: 'diff-text' }, 'No difference.'));
    } catch (e) {
      box.replaceChildren(el('p', { class: 'error' }, e.message));
    }
  }

  function confirmRollback(e, notice) {
    const m = $('modal');
    const tok = el('input', { type: 'password', id: 'rollback-token', placeholder: 'write token (empty: the one you signed in with)', autocomplete: 'off' });
    const err = el('p', { class: 'error', id: 'rollback-error' });
    const close = () => { m.hidden = true; m.replaceChildren(); };
    const go = async () => {
      err.textContent = '';
      try {
        const res = await api('/v1/rollback/' + e.revision, { method: 'POST', token: tok.value || token() });
        close();
        notice.replaceChildren(el('div', { class: 'card alert ok section' }, el('strong', {}, 'Rolled back to revision ' + e.revision + '. '),
          'New revision ' + res.revision + ', version ', version(res.version), '; proxies receive it now.'));
      } catch (x) {
        err.textContent = (x.status === 401 || x.status === 403 ? 'Refused (' + x.status + '): ' : 'Failed: ') + x.message;
      }
    };
    m.replaceChildren(el('div', { class: 'card', role: 'dialog', 'aria-modal': 'true' },
      el('h2', {}, 'Roll back to revision ' + e.revision + '?'),
      el('p', {}, 'This writes the config of revision ' + e.revision + ' (' + e.summary + ') as a new revision and publishes it to every proxy.'),
      el('label', { for: 'rollback-token' }, 'Write token'), tok, err,
      el('div', { class: 'actions' }, el('button', { type: 'button', onclick: close }, 'Cancel'), el('button', { type: 'button', class: 'danger', id: 'rollback-confirm', onclick: go }, 'Roll back'))));
    m.hidden = false;
  }

  // ---- rollout ----
  function rolloutView(root) {
    const notice = el('div', { id: 'rollout-action-result' });
    const view = {
      poll: async () => {
        const [st, r] = await Promise.all([api('/rollout/staged'), api('/rollout')]);
        const staged = stagedSection(st, notice, () => view.poll());
        const groups = r.groups || [];
        if (!r.at) {
          root.replaceChildren(el('div', {}, notice, staged, el('h1', { class: 'section' }, 'Rollout of the newest change'), el('p', { class: 'empty' }, 'No change published since this replica started.')));
          return;
        }
        // The chart spans the change's age while some proxies are still
        // pending, and a little past the last ACK once none are.
        const pending = groups.reduce((n, g) => n + g.pendingTotal, 0);
        const last = Math.max(0, ...groups.map((g) => g.series.length ? g.series[g.series.length - 1][0] : 0));
        const horizon = Math.max(1, pending ? r.elapsedSeconds : Math.min(r.elapsedSeconds, last * 1.25 + 1));
        root.replaceChildren(notice, staged, el('h1', { class: 'section' }, 'Rollout of the newest change'),
          el('p', { class: 'muted' }, 'Accepted ', when(r.at), '. ', r.note, '.'),
          el('div', { class: 'grid cols-2' },
            el('div', { class: 'card' }, el('h2', {}, 'ACKed over time'), chart(groups, horizon), legend(groups)),
            el('div', { class: 'card' }, el('h2', {}, 'Per group'), el('table', { id: 'rollout' },
              el('thead', {}, el('tr', {}, el('th', {}, 'Group'), el('th', {}, 'Progress'), el('th', { class: 'num' }, 'ACKed'), el('th', { class: 'num' }, 'Not yet'))),
              el('tbody', {}, groups.map((g) => el('tr', { 'data-group': g.group },
                el('td', {}, g.group),
                el('td', {}, el('span', { class: 'progress' }, progressBar(g.total ? g.done / g.total : 0))),
                el('td', { class: 'num done' }, num(g.done) + ' / ' + num(g.total)),
                el('td', { class: 'num' }, num(g.pendingTotal)))))))),
          el('div', { class: 'card section' }, el('h2', {}, 'Not ACKed yet'), pendingTable(groups)));
      },
    };
    return view;
  }

  // ---- staged rollouts (a group's rollout: policy) ----
  function fmtLeft(sec) {
    sec = Math.max(0, Math.round(sec));
    const h = Math.floor(sec / 3600), m = Math.floor((sec % 3600) / 60), x = sec % 60;
    return h ? h + 'h ' + m + 'm' : m ? m + 'm ' + x + 's' : x + 's';
  }

  function stagedSection(st, notice, reload) {
    const list = st.rollouts || [];
    const parts = [el('h1', {}, 'Staged rollouts')];
    if (st.partial) parts.push(el('div', { class: 'card alert info' }, el('strong', {}, 'Partial: '), st.partial));
    if (!list.length) {
      parts.push(el('p', { class: 'empty', id: 'staged-none' }, 'No staged rollout: a group with a rollout policy shows its stages, its nodes and its controls here.'));
      return el('div', { id: 'staged' }, parts);
    }
    parts.push(el('p', { class: 'muted' }, st.note, '.'));
    if (st.shared) {
      parts.push(el('div', { class: 'card alert info', id: 'staged-shared' }, el('strong', {}, 'Several replicas: '),
        'each drives its own copy of a rollout (its stage, timers and halts); these buttons act on replica ' + st.replica + '\'s. Drive a group\'s rollout through one replica.'));
    }
    parts.push(list.map((r) => stagedCard(r, notice, reload)));
    return el('div', { id: 'staged' }, parts);
  }

  function stagedState(r) {
    if (r.halted) {
      return el('span', { class: 'error', id: 'staged-state-' + r.group }, 'Halted at stage ' + r.haltedStage + ' of ' + r.stages + ' (' + r.halted + ') ', when(r.haltedAt),
        r.supersede ? ': the next change to the group replaces it' : ': its nodes run the previous version; changes to the group are refused until it is resumed or superseded');
    }
    const next = r.stage >= r.stages ? 'every node gets the new version' : 'stage ' + (r.stage + 1) + ' starts';
    return el('span', { id: 'staged-state-' + r.group }, 'Stage ' + r.stage + ' of ' + r.stages + ', entered ', when(r.enteredAt), ': ' + next + ' in ', el('strong', { class: 'bake-left' }, fmtLeft(r.nextInSeconds)));
  }

  function nodeNames(label, l, cls) {
    const more = l.total - l.nodes.length;
    return el('div', { class: 'names version-nodes ' + cls, 'data-total': l.total },
      el('strong', {}, label + ' (' + num(l.total) + '): '),
      l.nodes.length ? l.nodes.map((n) => el('a', { class: 'mono', href: '#/proxy/' + encodeURIComponent(n), 'data-node': n }, n)) : el('span', { class: 'muted' }, 'none'),
      more > 0 ? el('span', { class: 'muted' }, ' … and ' + num(more) + ' more') : null);
  }

  function stagedCard(r, notice, reload) {
    const act = (action, label, cls, disabled) => el('button', { type: 'button', class: 'rollout-action ' + (cls || ''), 'data-group': r.group, 'data-action': action,
      disabled, onclick: () => confirmRolloutAction(r, action, notice, reload) }, label);
    const actions = r.halted
      ? [act('resume', 'Resume', 'primary'), act('supersede', r.supersede ? 'Superseded' : 'Supersede', '', r.supersede)]
      : [act('promote', r.stage >= r.stages ? 'Complete now' : 'Promote to stage ' + (r.stage + 1), 'primary'), act('halt', 'Halt', 'danger')];
    return el('div', { class: 'card section staged' + (r.halted ? ' alert' : ''), 'data-group': r.group, 'data-state': r.halted ? 'halted' : 'running' },
      el('h2', {}, 'Group ', r.group, ' ', el('span', { class: 'pill' }, r.halted ? 'halted' : 'stage ' + r.stage + '/' + r.stages)),
      el('dl', { class: 'kv' },
        el('dt', {}, 'State'), el('dd', {}, stagedState(r)),
        el('dt', {}, 'Versions'), el('dd', {}, 'previous ', version(r.from), ' → new ', version(r.to)),
        r.halted ? [el('dt', {}, 'Why'), el('dd', {}, el('div', { class: 'error-text halt-detail' }, r.detail || r.halted))] : null),
      el('h3', {}, 'Nodes by the version they run'),
      nodeNames('New version', r.nodes.new, 'on-new'), nodeNames('Previous version', r.nodes.previous, 'on-previous'),
      r.nodes.neither.total ? nodeNames('Neither yet', r.nodes.neither, 'on-neither') : null,
      el('div', { class: 'actions section' }, actions));
  }

  // What each rollout action does, for its confirmation.
  const ROLLOUT_ACTIONS = {
    promote: (r) => r.stage >= r.stages
      ? ['Complete the rollout of ' + r.group + ' now?', 'Every node of the group gets the new version now, without waiting for the bake.', 'Complete']
      : ['Promote ' + r.group + ' to stage ' + (r.stage + 1) + '?', 'Stage ' + (r.stage + 1) + ' starts now, without waiting for the bake: its nodes get the new version.', 'Promote'],
    halt: (r) => ['Halt the rollout of ' + r.group + '?', 'Stage ' + r.stage + ' is rolled back: its nodes get the previous version again, and changes to the group are refused until you resume or supersede the rollout.', 'Halt'],
    resume: (r) => ['Resume the rollout of ' + r.group + '?', 'It restarts at stage ' + Math.max(1, r.haltedStage) + ', whose nodes get the new version again; the stage\'s bake is counted again.', 'Resume'],
    supersede: (r) => ['Supersede the halted rollout of ' + r.group + '?', 'The next change to the group replaces it (with a config file, the refused change is applied again now).', 'Supersede'],
  };

  // confirmRolloutAction asks before calling POST
  // /v1/rollouts/{group}/{action} with the write token typed in, or the
  // one signed in with; the token is not kept.
  function confirmRolloutAction(r, action, notice, reload) {
    const m = $('modal');
    const [title, text, verb] = ROLLOUT_ACTIONS[action](r);
    const tok = el('input', { type: 'password', id: 'rollout-token', placeholder: 'write token (empty: the one you signed in with)', autocomplete: 'off' });
    const err = el('p', { class: 'error', id: 'rollout-error' });
    const close = () => { m.hidden = true; m.replaceChildren(); };
    const go = async () => {
      err.textContent = '';
      try {
        const res = await api('/v1/rollouts/' + encodeURIComponent(r.group) + '/' + action, { method: 'POST', token: tok.value || token() });
        close();
        notice.replaceChildren(el('div', { class: 'card alert ok section' }, el('strong', {}, verb + ': ' + r.group + '. '),
          res.halted ? 'Halted at stage ' + res.haltedStage + '.' : res.stage ? 'Now at stage ' + res.stage + ' of ' + res.stages + '.' : 'Done.'));
        await reload();
      } catch (x) {
        err.textContent = (x.status === 401 || x.status === 403 ? 'Refused (' + x.status + '): ' : 'Failed: ') + x.message;
      }
    };
    m.replaceChildren(el('div', { class: 'card', role: 'dialog', 'aria-modal': 'true' },
      el('h2', {}, title), el('p', {}, text),
      el('label', { for: 'rollout-token' }, 'Write token'), tok, err,
      el('div', { class: 'actions' }, el('button', { type: 'button', onclick: close }, 'Cancel'),
        el('button', { type: 'button', class: action === 'halt' ? 'danger' : 'primary', id: 'rollout-confirm', onclick: go }, verb))));
    m.hidden = false;
  }

  function progressBar(frac) {
    const b = el('span', { class: 'bar' });
    b.style.width = Math.round(frac * 100) + '%'; // CSSOM, allowed by the policy
    b.style.display = 'block';
    return b;
  }

  function legend(groups) {
    return el('div', { class: 'legend' }, groups.map((g, i) => el('span', {}, el('span', { class: 'swatch sw-' + (i % 6) }), g.group)));
  }

  // chart draws each group's done count over time as a step line.
  function chart(groups, horizon) {
    const W = 600, H = 180, L = 40, B = 22, T = 8, R = 10;
    const ymax = Math.max(1, ...groups.map((g) => g.total));
    const x = (s) => L + (W - L - R) * Math.min(1, s / horizon);
    const y = (n) => H - B - (H - B - T) * (n / ymax);
    const svg = el('svg', { class: 'chart', viewBox: '0 0 ' + W + ' ' + H, preserveAspectRatio: 'none', role: 'img', 'aria-label': 'proxies that ACKed the change over time' });
    const tick = Math.max(1, Math.ceil(ymax / 4));
    for (let n = 0; n <= ymax; n += tick) {
      svg.appendChild(el('line', { class: 'grid', x1: L, x2: W - R, y1: y(n), y2: y(n) }));
      svg.appendChild(el('text', { x: L - 6, y: y(n) + 3, 'text-anchor': 'end' }, num(n)));
    }
    svg.appendChild(el('line', { class: 'axis', x1: L, x2: W - R, y1: H - B, y2: H - B }));
    svg.appendChild(el('text', { x: L, y: H - 6 }, '0s'));
    svg.appendChild(el('text', { x: W - R, y: H - 6, 'text-anchor': 'end' }, horizon.toFixed(horizon < 10 ? 1 : 0) + 's after the change'));
    groups.forEach((g, i) => {
      const pts = [[0, 0]];
      for (const [s, n] of g.series || []) { pts.push([s, pts[pts.length - 1][1]]); pts.push([s, n]); }
      pts.push([horizon, pts[pts.length - 1][1]]);
      svg.appendChild(el('polyline', { class: 'line sw-' + (i % 6), points: pts.map(([s, n]) => x(s).toFixed(1) + ',' + y(n).toFixed(1)).join(' ') }));
    });
    return svg;
  }

  function pendingTable(groups) {
    const rows = [];
    for (const g of groups) for (const p of g.pending || []) {
      rows.push(el('tr', { 'data-node': p.node }, el('td', {}, g.group), el('td', {}, el('a', { class: 'mono', href: '#/proxy/' + encodeURIComponent(p.node) }, p.node)),
        el('td', {}, Object.entries(p.states).map(([t, st]) => badge(st, t + ' ' + st)))));
    }
    const more = groups.reduce((n, g) => n + g.pendingTotal - (g.pending || []).length, 0);
    if (!rows.length) return el('p', { class: 'empty', id: 'pending-none' }, 'Every proxy taking part has ACKed it.');
    return el('div', {}, el('table', { id: 'pending' }, el('thead', {}, el('tr', {}, el('th', {}, 'Group'), el('th', {}, 'Node'), el('th', {}, 'States'))), el('tbody', {}, rows)),
      more > 0 ? el('p', { class: 'muted' }, '… and ' + num(more) + ' more') : null);
  }

  // ---- start ----
  function start() {
    $('signin-form').addEventListener('submit', async (ev) => {
      ev.preventDefault();
      const t = $('token').value.trim();
      try {
        await api('/summary', { token: t });
      } catch (e) {
        const err = $('signin-error');
        err.hidden = false;
        err.textContent = (e.status === 401 ? 'Refused: ' : 'Failed: ') + e.message;
        return;
      }
      sessionStorage.setItem(TOKEN_KEY, t);
      $('token').value = '';
      route();
    });
    $('signout').addEventListener('click', () => signIn(''));
    document.addEventListener('visibilitychange', () => { if (!document.hidden && live.view) refresh(); });
    window.addEventListener('hashchange', route);
    route();
  }

  document.addEventListener('DOMContentLoaded', start);
})();
