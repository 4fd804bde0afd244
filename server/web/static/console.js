// Switchboard operator console: a small single-page app over the JSON API.
//
// No build step and no dependencies. The page (GET /console) carries the
// CSRF token and the principal in <meta> tags; every call goes to /v1 with
// the session cookie and X-CSRF-Token. The DOM is built with createElement
// and textContent only (never innerHTML), so API data cannot inject markup,
// and nothing here needs 'unsafe-inline' or 'unsafe-eval'.
'use strict';

(() => {
  const app = document.getElementById('app');
  if (!app) return;

  const meta = (name) => {
    const m = document.querySelector(`meta[name="${name}"]`);
    return m ? m.getAttribute('content') || '' : '';
  };
  const CSRF = meta('csrf-token');
  const PRINCIPAL = meta('principal-id');
  const SCOPES = new Set(meta('principal-scopes').split(/\s+/).filter(Boolean));
  const PAGE = 50;
  const enc = encodeURIComponent;

  // can reports whether the signed-in key holds one of the scopes (admin
  // holds all). Unknown scopes (no meta tag) allow everything: the server
  // decides anyway.
  const can = (...scopes) => SCOPES.size === 0 || SCOPES.has('admin') || scopes.some((s) => SCOPES.has(s));

  // ---------- DOM helpers ----------

  function add(el, children) {
    for (const c of children.flat(Infinity)) {
      if (c == null || c === false) continue;
      el.append(c instanceof Node ? c : String(c));
    }
    return el;
  }

  function setAttrs(el, attrs) {
    if (!attrs) return;
    for (const [k, v] of Object.entries(attrs)) {
      if (v == null || v === false) continue;
      if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
      else el.setAttribute(k, v === true ? '' : String(v));
    }
  }

  // h builds an HTML element: h('a', {href: '#/x', class: 'y'}, 'text', child).
  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    setAttrs(el, attrs);
    return add(el, children);
  }

  const SVGNS = 'http://www.w3.org/2000/svg';
  function s(tag, attrs, ...children) {
    const el = document.createElementNS(SVGNS, tag);
    setAttrs(el, attrs);
    return add(el, children);
  }

  let uidCounter = 0;
  const uid = (p) => `${p}-${++uidCounter}`;

  // ---------- formatting ----------

  const nf = new Intl.NumberFormat();
  const compact = new Intl.NumberFormat(undefined, { notation: 'compact', maximumFractionDigits: 1 });

  function fmtUsd(v) {
    if (v == null || !Number.isFinite(v)) return '—';
    if (v === 0) return '$0';
    if (Math.abs(v) < 0.01) return '$' + v.toFixed(10).replace(/0+$/, '');
    return '$' + v.toLocaleString(undefined, { minimumFractionDigits: 2, maximumFractionDigits: 4 });
  }
  const fmtInt = (v) => (v == null ? '—' : nf.format(v));

  function relative(ms) {
    const abs = Math.abs(ms);
    const units = [['day', 86400000], ['hour', 3600000], ['minute', 60000], ['second', 1000]];
    const rtf = new Intl.RelativeTimeFormat(undefined, { numeric: 'auto' });
    for (const [u, size] of units) {
      if (abs >= size || u === 'second') return rtf.format(Math.round(ms / size), u);
    }
    return '';
  }

  // when renders a timestamp as <time>, local time, ISO in the tooltip.
  function when(iso, withRelative) {
    if (!iso) return '—';
    const d = new Date(iso);
    if (Number.isNaN(d.getTime())) return iso;
    const opts = { month: 'short', day: 'numeric', hour: 'numeric', minute: '2-digit', second: '2-digit' };
    if (d.getFullYear() !== new Date().getFullYear()) opts.year = 'numeric';
    const text = d.toLocaleString(undefined, opts);
    return h('time', { datetime: iso, title: iso }, text,
      withRelative ? h('span', { class: 'muted' }, ` (${relative(d.getTime() - Date.now())})`) : null);
  }

  const json = (v) => (typeof v === 'string' ? v : JSON.stringify(v === undefined ? null : v, null, 2));
  const code = (t) => h('code', null, t);
  const pre = (t, cls) => h('pre', { class: cls || 'code' }, t);

  function badge(text, cls) {
    return h('span', { class: `badge ${cls || ''}`.trim() }, text);
  }
  function statusBadge(status) {
    return badge(String(status || 'unknown').replace(/_/g, ' '), `status-${status || 'unknown'}`);
  }
  function httpBadge(n) {
    if (n == null) return h('span', { class: 'muted' }, '—');
    const cls = n >= 500 ? 'http-5xx' : n >= 400 ? 'http-4xx' : n >= 300 ? 'http-3xx' : 'http-2xx';
    return badge(String(n), cls);
  }
  const muted = (t) => h('span', { class: 'muted' }, t);
  // spaced puts a space between inline elements.
  const spaced = (els) => els.flatMap((el, i) => (i ? [' ', el] : [el]));

  // dl renders [label, value] pairs, skipping empty values.
  function dl(pairs) {
    const el = h('dl', { class: 'props' });
    for (const [k, v] of pairs) {
      if (v == null || v === '' || (Array.isArray(v) && v.length === 0)) continue;
      el.append(h('dt', null, k), h('dd', null, v));
    }
    return el;
  }

  function qs(params) {
    const u = new URLSearchParams();
    for (const [k, v] of Object.entries(params || {})) if (v != null && v !== '') u.set(k, String(v));
    const q = u.toString();
    return q ? `?${q}` : '';
  }

  // ---------- API ----------

  class ApiError extends Error {
    constructor(status, body, requestId) {
      super(body.message || `HTTP ${status}`);
      this.status = status;
      this.code = body.code || `http_${status}`;
      this.details = body.details || null;
      this.requestId = body.requestId || requestId || '';
    }
  }

  // api calls the JSON API with the session cookie. A 401 means the session
  // ended: back to /console (the sign-in page).
  async function api(method, path, body) {
    const headers = { 'X-CSRF-Token': CSRF, Accept: 'application/json' };
    const init = { method, credentials: 'same-origin', headers, cache: 'no-store' };
    if (body !== undefined) {
      headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    let res;
    try {
      res = await fetch(path, init);
    } catch (e) {
      throw new ApiError(0, { code: 'network_error', message: `Could not reach the server (${e.message}). Check your connection and try again.` });
    }
    const rid = res.headers.get('X-Request-Id') || '';
    if (res.status === 401) {
      window.location.assign('/console');
      throw new ApiError(401, { code: 'unauthenticated', message: 'Your session has ended; taking you to the sign-in page.' }, rid);
    }
    const text = await res.text();
    let data = null;
    if (text) {
      try { data = JSON.parse(text); } catch (_) { data = null; }
    }
    if (!res.ok) {
      const e = data && data.error && typeof data.error === 'object'
        ? data.error
        : { message: (text || res.statusText || '').slice(0, 500) || `HTTP ${res.status}` };
      throw new ApiError(res.status, e, rid);
    }
    return data;
  }

  // errorBox renders an API error readably: code, message, problems,
  // details and the request id to quote in a support request.
  function errorBox(err, opts) {
    const e = err instanceof ApiError ? err : new ApiError(0, { code: 'error', message: String(err && err.message || err) });
    const title = e.status === 403 && e.code !== 'egress_denied' ? 'Not allowed'
      : e.status === 0 ? 'Network error'
        : e.status === 429 ? 'Slow down' : `Error ${e.status}`;
    const box = h('div', { class: 'error', role: 'alert' },
      h('p', { class: 'error-title' }, h('strong', null, title), ' ', code(e.code)),
      h('p', { class: 'error-message' }, e.message));
    if (e.status === 403 && e.code === 'forbidden' && SCOPES.size) {
      box.append(h('p', { class: 'muted' }, `Your key's scopes: ${[...SCOPES].join(', ')}.`));
    }
    const details = Object.assign({}, e.details || {});
    const problems = Array.isArray(details.problems) ? details.problems : [];
    delete details.problems;
    if (problems.length) {
      box.append(h('ul', { class: 'problems' }, problems.map((p) =>
        h('li', null, p.field ? [code(p.field), ': '] : null, p.problem || json(p)))));
    }
    if (Object.keys(details).length) {
      if (opts && opts.openDetails) box.append(h('p', { class: 'muted' }, 'Details'), pre(json(details)));
      else box.append(h('details', null, h('summary', null, 'Details'), pre(json(details))));
    }
    if (e.requestId) box.append(h('p', { class: 'request-id muted' }, 'Request ID: ', code(e.requestId)));
    return box;
  }

  const loading = (what) => h('p', { class: 'loading', role: 'status' }, what || 'Loading…');

  // button with a busy state while an async handler runs.
  function button(label, onClick, cls) {
    const b = h('button', { type: 'button', class: cls || '' }, label);
    if (onClick) {
      b.addEventListener('click', async (ev) => {
        if (b.disabled) return;
        b.disabled = true;
        b.setAttribute('aria-busy', 'true');
        try { await onClick(ev); } finally {
          b.disabled = false;
          b.removeAttribute('aria-busy');
        }
      });
    }
    return b;
  }

  // paged shows one list endpoint 50 items at a time with "Load more".
  // opts: path, params, head (column titles; omit for a card list), row
  // (item => element or elements), empty (message when there are none).
  function paged(opts) {
    const body = opts.head ? h('tbody') : h('div', { class: 'cards' });
    const table = opts.head
      ? h('div', { class: 'table-wrap' }, h('table', { class: `table ${opts.tableClass || ''}`.trim() },
        h('thead', null, h('tr', null, opts.head.map((c) => h('th', { scope: 'col' }, c)))), body))
      : body;
    const status = h('div', { class: 'list-status', 'aria-live': 'polite' });
    const more = h('button', { type: 'button', class: 'more', hidden: true }, 'Load more');
    const wrap = h('div', { class: 'paged' }, table, status, more);
    let cursor = '';
    let count = 0;
    let gen = 0;
    table.hidden = true;

    async function load() {
      const mine = gen;
      more.disabled = true;
      status.replaceChildren(loading());
      try {
        const res = await api('GET', opts.path + qs(Object.assign({}, opts.params, { limit: PAGE, cursor })));
        if (mine !== gen) return;
        const items = (res && res.data) || [];
        for (const it of items) add(body, [opts.row(it)]);
        count += items.length;
        cursor = (res && res.nextCursor) || '';
        table.hidden = count === 0;
        more.hidden = !cursor;
        status.replaceChildren();
        if (!count) status.append(h('p', { class: 'empty' }, cursor ? 'Nothing found yet; load more to look further back.' : opts.empty));
      } catch (e) {
        if (mine === gen) status.replaceChildren(errorBox(e));
      } finally {
        more.disabled = false;
      }
    }
    more.addEventListener('click', load);
    wrap.reload = () => {
      gen++;
      body.replaceChildren();
      cursor = '';
      count = 0;
      table.hidden = true;
      more.hidden = true;
      return load();
    };
    // prepend shows a new item first (e.g. a just-queued delivery).
    wrap.prepend = (item) => {
      const els = [opts.row(item)].flat();
      body.prepend(...els);
      count += 1;
      table.hidden = false;
      status.replaceChildren();
      return els;
    };
    load();
    return wrap;
  }

  function section(title, ...children) {
    return h('section', { class: 'panel' }, title ? h('h2', null, title) : null, ...children);
  }

  function viewRoot(name, title, crumbs) {
    const h1 = h('h1', { tabindex: '-1' }, title);
    const root = h('section', { 'data-view': name, class: 'view' },
      crumbs ? h('nav', { class: 'crumbs', 'aria-label': 'Breadcrumb' }, crumbs.map((c, i) =>
        [i ? h('span', { class: 'sep', 'aria-hidden': 'true' }, '/') : null, c[1] ? h('a', { href: c[1] }, c[0]) : h('span', null, c[0])])) : null,
      h('header', { class: 'view-head' }, h1));
    root.head = root.querySelector('.view-head');
    root.h1 = h1;
    return root;
  }

  // connectorPicker fills a <select> with connectors, a page at a time;
  // onPick(name) runs on a change. The selected name is always an option.
  function connectorPicker(selected, onPick) {
    const id = uid('connector');
    const sel = h('select', { id, name: 'connector' });
    const more = h('button', { type: 'button', class: 'link-button', hidden: true }, 'More connectors');
    const status = h('span', { class: 'picker-status', 'aria-live': 'polite' });
    const wrap = h('div', { class: 'toolbar' }, h('label', { for: id }, 'Connector'), sel, more, status);
    const seen = new Set();
    let cursor = '';
    const opt = (name, label) => {
      if (seen.has(name)) return;
      seen.add(name);
      sel.append(h('option', { value: name }, label || name));
    };
    if (selected) opt(selected);
    async function load() {
      more.disabled = true;
      status.replaceChildren(loading('Loading connectors…'));
      try {
        const res = await api('GET', '/v1/connectors' + qs({ limit: 100, cursor }));
        for (const c of res.data || []) opt(c.name, c.displayName ? `${c.name} — ${c.displayName}` : c.name);
        cursor = res.nextCursor || '';
        more.hidden = !cursor;
        status.replaceChildren();
        if (!seen.size) status.append(h('span', { class: 'empty' }, 'No connectors yet.'));
        if (selected) sel.value = selected;
        return res.data || [];
      } catch (e) {
        status.replaceChildren(errorBox(e));
        return [];
      } finally {
        more.disabled = false;
      }
    }
    wrap.loaded = load();
    more.addEventListener('click', load);
    sel.addEventListener('change', () => onPick(sel.value));
    return wrap;
  }

  // ---------- views: connectors ----------

  function authSummary(a) {
    if (!a || !a.type || a.type === 'none') return 'none';
    if (a.type === 'apiKey') return `apiKey (${a.in || '?'}: ${a.name || '?'})`;
    if (a.type === 'oauth2') return `oauth2 (${a.grant || '?'})`;
    return a.type;
  }

  function viewConnectors() {
    const root = viewRoot('connectors', 'Connectors');
    root.append(paged({
      path: '/v1/connectors',
      head: ['Name', 'Display name', 'Auth', 'Base URL', 'Version', 'Updated'],
      empty: 'No connectors yet. Create one with the API (POST /v1/connectors) or Terraform (switchboard_connector).',
      row: (c) => h('tr', { 'data-connector': c.name },
        h('td', null, h('a', { href: `#/connectors/${enc(c.name)}` }, c.name)),
        h('td', null, c.displayName || muted('—')),
        h('td', null, authSummary(c.auth)),
        h('td', { class: 'url' }, c.baseUrl),
        h('td', { class: 'num' }, fmtInt(c.version)),
        h('td', null, when(c.updatedAt))),
    }));
    return root;
  }

  function authDetails(a) {
    a = a || { type: 'none' };
    const yes = (b) => (b ? 'yes' : 'no');
    return dl([
      ['Type', code(a.type)],
      ['Key name', a.name],
      ['Key placement', a.in],
      ['Prefix', a.prefix ? code(JSON.stringify(a.prefix)) : null],
      ['Grant', a.grant],
      ['Authorization URL', a.authorizationUrl],
      ['Token URL', a.tokenUrl],
      ['Client ID', a.clientId ? code(a.clientId) : null],
      ['Client secret stored', a.type === 'oauth2' ? yes(a.clientSecretSet) : null],
      ['Client authentication', a.clientAuth],
      ['Scopes', (a.scopes || []).length ? a.scopes.map((x) => badge(x, 'scope')) : null],
      ['Authorization parameters', a.authorizationParams && Object.keys(a.authorizationParams).length ? pre(json(a.authorizationParams)) : null],
      ['Token parameters', a.tokenParams && Object.keys(a.tokenParams).length ? pre(json(a.tokenParams)) : null],
      ['Redirect URLs', (a.redirectUrls || []).length ? h('ul', { class: 'plain' }, a.redirectUrls.map((u) => h('li', null, u))) : null],
    ]);
  }

  function viewConnector(name) {
    const root = viewRoot('connector', name, [['Connectors', '#/connectors'], [name]]);
    root.head.append(h('div', { class: 'head-links' },
      h('a', { href: `#/connections/${enc(name)}` }, 'Connections'),
      h('a', { href: `#/invocations/${enc(name)}` }, 'Invocations')));
    const body = h('div', null, loading());
    root.append(body);
    (async () => {
      let c;
      try {
        c = await api('GET', `/v1/connectors/${enc(name)}`);
      } catch (e) {
        body.replaceChildren(errorBox(e));
        return;
      }
      if (c.displayName) root.h1.append(' ', h('span', { class: 'muted subtitle' }, c.displayName));
      body.replaceChildren(
        h('div', { class: 'grid-2' },
          section('Details', dl([
            ['Description', c.description],
            ['Base URL', code(c.baseUrl)],
            ['Version', fmtInt(c.version)],
            ['Created', when(c.createdAt)],
            ['Updated', when(c.updatedAt)],
          ]), c.connectPage ? [h('h3', null, 'Connect page'), dl([
            ['Logo', c.connectPage.logoUrl],
            ['Help text', c.connectPage.helpText],
            ['Test action', c.connectPage.testAction ? code(c.connectPage.testAction) : null],
          ])] : null),
          section('Authentication', authDetails(c.auth),
            h('p', { class: 'muted small' }, 'Credentials belong to connections and are never shown.'))),
        section('Actions', !can('invoke') ? h('p', { class: 'note' }, 'Running actions needs the invoke scope; your key does not hold it.') : null,
          paged({
            path: `/v1/connectors/${enc(name)}/actions`,
            empty: 'This connector has no actions yet.',
            row: (a) => actionCard(name, a),
          })));
    })();
    return root;
  }

  function actionCard(connector, a) {
    const params = Object.entries(a.parameters || {});
    const card = h('article', { class: 'action card', 'data-action': a.name, id: `action-${a.name}` },
      h('h3', null, badge(a.method, `method method-${String(a.method).toLowerCase()}`), ' ', a.name, ' ', code(a.path)),
      a.description ? h('p', null, a.description) : null,
      a.timeoutMs ? h('p', { class: 'muted small' }, `Timeout: ${fmtInt(a.timeoutMs)} ms`) : null);
    if (params.length) {
      card.append(h('h4', null, 'Parameters'), h('div', { class: 'table-wrap' }, h('table', { class: 'table params' },
        h('thead', null, h('tr', null, ['Name', 'Type', 'Required', 'In', 'Enum', 'Default', 'Description'].map((t) => h('th', { scope: 'col' }, t)))),
        h('tbody', null, params.map(([pn, p]) => h('tr', null,
          h('td', null, code(pn)),
          h('td', null, p.type),
          h('td', null, p.required ? badge('required', 'required') : muted('optional')),
          h('td', null, p.in || muted('auto')),
          h('td', null, Array.isArray(p.enum) && p.enum.length ? spaced(p.enum.map((v) => code(JSON.stringify(v)))) : muted('—')),
          h('td', null, p.default !== undefined ? code(JSON.stringify(p.default)) : muted('—')),
          h('td', null, p.description || '')))))));
    } else {
      card.append(h('p', { class: 'muted small' }, 'No parameters.'));
    }
    if (a.headers && Object.keys(a.headers).length) {
      card.append(h('h4', null, 'Headers'), dl(Object.entries(a.headers).map(([k, v]) => [k, code(v)])));
    }
    if (a.body !== undefined && a.body !== null) card.append(h('h4', null, 'Body template'), pre(json(a.body)));
    if (a.transformation) card.append(h('h4', null, 'Transformation'), pre(a.transformation, 'code transformation'));
    card.append(tryItForm(connector, a, params));
    return card;
  }

  // paramControl builds the input for one parameter; read() returns
  // {value} or {skip} or throws with a message.
  function paramControl(name, p) {
    const id = uid('param');
    const help = p.description ? h('small', { id: `${id}-help`, class: 'help' }, p.description) : null;
    const describedBy = help ? `${id}-help` : null;
    let ctl;
    let read;
    const hasEnum = Array.isArray(p.enum) && p.enum.length > 0;
    if (hasEnum || p.type === 'boolean') {
      const values = hasEnum ? p.enum : [true, false];
      ctl = h('select', { id, name, 'aria-describedby': describedBy },
        h('option', { value: '' }, p.required ? '(choose)' : p.default !== undefined ? `(default: ${JSON.stringify(p.default)})` : '(not set)'),
        values.map((v) => h('option', { value: JSON.stringify(v) }, typeof v === 'string' ? v : JSON.stringify(v))));
      read = () => (ctl.value === '' ? { skip: true } : { value: JSON.parse(ctl.value) });
    } else if (p.type === 'array' || p.type === 'object') {
      ctl = h('textarea', {
        id, name, rows: 3, spellcheck: 'false', 'aria-describedby': describedBy,
        placeholder: p.default !== undefined ? JSON.stringify(p.default) : (p.type === 'array' ? '["a", "b"]' : '{"key": "value"}'),
      });
      read = () => {
        const t = ctl.value.trim();
        if (!t) return { skip: true };
        let v;
        try { v = JSON.parse(t); } catch (e) { throw new Error(`${name}: not valid JSON (${e.message})`); }
        if (p.type === 'array' && !Array.isArray(v)) throw new Error(`${name}: expected a JSON array`);
        if (p.type === 'object' && (v === null || typeof v !== 'object' || Array.isArray(v))) throw new Error(`${name}: expected a JSON object`);
        return { value: v };
      };
    } else if (p.type === 'number' || p.type === 'integer') {
      ctl = h('input', {
        id, name, type: 'text', inputmode: p.type === 'integer' ? 'numeric' : 'decimal', autocomplete: 'off',
        placeholder: p.default !== undefined ? String(p.default) : '', 'aria-describedby': describedBy,
      });
      read = () => {
        const t = ctl.value.trim();
        if (!t) return { skip: true };
        const v = Number(t);
        if (!Number.isFinite(v)) throw new Error(`${name}: "${t}" is not a number`);
        if (p.type === 'integer' && !Number.isInteger(v)) throw new Error(`${name}: "${t}" is not an integer`);
        return { value: v };
      };
    } else {
      ctl = h('input', {
        id, name, type: 'text', autocomplete: 'off', spellcheck: 'false',
        placeholder: p.default !== undefined ? String(p.default) : '', 'aria-describedby': describedBy,
      });
      read = () => (ctl.value === '' ? { skip: true } : { value: ctl.value });
    }
    if (p.required) ctl.setAttribute('aria-required', 'true');
    const label = h('label', { for: id }, code(name), ' ', h('span', { class: 'muted' }, p.type), p.required ? h('span', { class: 'req', title: 'required' }, ' *') : null);
    return { el: h('div', { class: 'field' }, label, ctl, help), read };
  }

  function tryItForm(connector, a, params) {
    const controls = params.map(([pn, p]) => [pn, paramControl(pn, p)]);
    const connId = uid('conn');
    const conn = h('input', { id: connId, name: 'connection', type: 'text', value: 'default', autocomplete: 'off', spellcheck: 'false', required: true });
    const out = h('div', { class: 'run-output', 'aria-live': 'polite' });
    const run = h('button', { type: 'submit', class: 'primary' }, 'Run');
    const form = h('form', { class: 'try-it', novalidate: true },
      h('h4', null, 'Try it'),
      h('div', { class: 'fields' }, controls.map(([, c]) => c.el),
        h('div', { class: 'field' }, h('label', { for: connId }, 'Connection'), conn)),
      h('div', { class: 'form-actions' }, run),
      out);
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      if (run.disabled) return;
      const paramsOut = {};
      const problems = [];
      for (const [pn, c] of controls) {
        try {
          const r = c.read();
          if (!r.skip) paramsOut[pn] = r.value;
        } catch (e) { problems.push(e.message); }
      }
      if (problems.length) {
        out.replaceChildren(h('div', { class: 'error', role: 'alert' }, h('p', { class: 'error-title' }, h('strong', null, 'Fix these parameters first')),
          h('ul', { class: 'problems' }, problems.map((p) => h('li', null, p)))));
        return;
      }
      const body = { action: a.name, params: paramsOut };
      if (conn.value.trim()) body.connection = conn.value.trim();
      run.disabled = true;
      out.replaceChildren(loading('Running…'));
      const started = performance.now();
      try {
        const res = await api('POST', `/v1/integrations/${enc(connector)}/run`, body);
        out.replaceChildren(h('div', { class: 'run-result ok' },
          h('p', { class: 'run-meta' }, 'Upstream status ', httpBadge(res.status), ' · ',
            h('span', { class: 'duration' }, `${fmtInt(res.durationMs)} ms`)),
          pre(json(res.result), 'code result')));
      } catch (e) {
        out.replaceChildren(h('div', { class: 'run-result failed' }, errorBox(e, { openDetails: true }),
          h('p', { class: 'run-meta muted small' }, `Failed after ${fmtInt(Math.round(performance.now() - started))} ms (round trip).`)));
      } finally {
        run.disabled = false;
      }
    });
    return form;
  }

  // ---------- views: connections ----------

  function connectLinkPanel(res) {
    const id = uid('link');
    const input = h('input', { id, type: 'text', readonly: true, class: 'link-url', value: res.url, spellcheck: 'false' });
    const copy = h('button', { type: 'button' }, 'Copy');
    copy.addEventListener('click', async () => {
      let ok = false;
      try {
        if (navigator.clipboard) { await navigator.clipboard.writeText(res.url); ok = true; }
      } catch (_) { ok = false; }
      if (!ok) {
        input.select();
        try { ok = document.execCommand('copy'); } catch (_) { ok = false; }
      }
      copy.textContent = ok ? 'Copied' : 'Press Ctrl+C to copy';
      if (ok) input.select();
      setTimeout(() => { copy.textContent = 'Copy'; }, 2000);
    });
    input.addEventListener('focus', () => input.select());
    return h('div', { class: 'connect-link' },
      h('label', { for: id }, `Connect link for ${res.connection || 'default'}`),
      h('div', { class: 'copy-row' }, input, copy),
      h('p', { class: 'muted small' }, 'Single use; send it to the account owner. Expires ', when(res.expiresAt, true), '.'));
  }

  async function createConnectLink(connector, connection, out) {
    out.replaceChildren(loading('Creating connect link…'));
    try {
      const res = await api('POST', '/v1/connect-sessions', { connector, connection });
      out.replaceChildren(connectLinkPanel(res));
    } catch (e) {
      out.replaceChildren(errorBox(e));
    }
  }

  const NAME_RE = /^[a-z0-9][a-z0-9_-]{0,63}$/;

  function viewConnections(name) {
    const root = viewRoot('connections', 'Connections');
    const picker = connectorPicker(name, (v) => { window.location.hash = `#/connections/${enc(v)}`; });
    root.append(picker);
    const body = h('div');
    root.append(body);
    if (!name) {
      picker.loaded.then((list) => {
        if (list.length) window.location.replace(`#/connections/${enc(list[0].name)}`);
      });
      return root;
    }
    const note = h('div');
    body.append(note);
    let linkable = true;
    api('GET', `/v1/connectors/${enc(name)}`).then((c) => {
      const a = c.auth || { type: 'none' };
      if (a.type === 'none') {
        linkable = false;
        note.replaceChildren(h('p', { class: 'note' }, `${name} uses no authentication, so it takes no connections.`));
      } else if (a.type === 'oauth2' && a.grant === 'client_credentials') {
        linkable = false;
        note.replaceChildren(h('p', { class: 'note' }, `${name} uses the OAuth 2.0 client-credentials grant: connections need no end-user credentials, so there is nothing to link.`));
      }
      root.querySelectorAll('button.connect-link-button').forEach((b) => { b.hidden = !linkable; });
    }, () => { /* the list below shows the error */ });

    const table = paged({
      path: `/v1/connectors/${enc(name)}/connections`,
      head: ['Name', 'Auth type', 'Status', 'Scopes', 'Token expires', 'Updated', ''],
      empty: 'No connections yet.',
      row: (cn) => {
        const tr = h('tr', { 'data-connection': cn.name });
        const out = h('td', { colspan: 7 });
        const outRow = h('tr', { class: 'link-row', hidden: true }, out);
        const btn = button('Create connect link', async () => {
          outRow.hidden = false;
          await createConnectLink(name, cn.name, out);
        }, 'connect-link-button');
        btn.hidden = !linkable;
        add(tr, [
          h('td', null, code(cn.name)),
          h('td', null, cn.authType),
          h('td', null, statusBadge(cn.status)),
          h('td', null, (cn.scopes || []).length ? cn.scopes.map((x) => badge(x, 'scope')) : muted('—')),
          h('td', null, cn.expiresAt ? when(cn.expiresAt, true) : muted('—')),
          h('td', null, when(cn.updatedAt)),
          h('td', { class: 'actions' }, btn),
        ]);
        return [tr, outRow];
      },
    });
    body.append(section(`Connections of ${name}`, table));

    const inId = uid('newconn');
    const input = h('input', { id: inId, name: 'connection', type: 'text', required: true, autocomplete: 'off', spellcheck: 'false', placeholder: 'e.g. user_42', pattern: NAME_RE.source, maxlength: 64 });
    const out = h('div', { 'aria-live': 'polite' });
    const submit = h('button', { type: 'submit', class: 'primary connect-link-button' }, 'Create connect link');
    const form = h('form', { class: 'inline-form', novalidate: true },
      h('div', { class: 'field' }, h('label', { for: inId }, 'Connection name'), input,
        h('small', { class: 'help' }, 'Lower-case letters, digits, _ and -; up to 64 characters. An existing name gets its credentials replaced.')),
      h('div', { class: 'form-actions' }, submit));
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      const v = input.value.trim();
      if (!NAME_RE.test(v)) {
        out.replaceChildren(h('div', { class: 'error', role: 'alert' }, h('p', null, 'Enter a connection name: a lower-case letter or digit, then up to 63 lower-case letters, digits, _ or -.')));
        input.focus();
        return;
      }
      submit.disabled = true;
      try { await createConnectLink(name, v, out); } finally { submit.disabled = false; }
    });
    body.append(section('Connect a new account', h('p', { class: 'muted small' }, 'Creates a single-use link to the hosted connect page, where the account owner enters their credentials or signs in with OAuth.'), form, out));
    return root;
  }

  // ---------- views: invocations ----------

  function viewInvocations(name) {
    const root = viewRoot('invocations', 'Invocation log');
    const picker = connectorPicker(name, (v) => { window.location.hash = `#/invocations/${enc(v)}`; });
    root.append(picker);
    if (!name) {
      picker.loaded.then((list) => {
        if (list.length) window.location.replace(`#/invocations/${enc(list[0].name)}`);
      });
      return root;
    }
    const list = paged({
      path: `/v1/connectors/${enc(name)}/invocations`,
      head: ['Time', 'Action', 'Connection', 'Status', 'Duration', 'Error code', 'Request ID'],
      empty: 'No invocations yet.',
      row: (iv) => h('tr', { class: iv.errorCode ? 'row-failed' : '' },
        h('td', null, when(iv.createdAt)),
        h('td', null, h('a', { href: `#/connectors/${enc(name)}` }, iv.action)),
        h('td', null, iv.connection ? code(iv.connection) : muted('—')),
        h('td', null, httpBadge(iv.status)),
        h('td', { class: 'num' }, `${fmtInt(iv.durationMs)} ms`),
        h('td', null, iv.errorCode ? badge(iv.errorCode, 'error-code') : muted('—')),
        h('td', null, iv.requestId ? code(iv.requestId) : muted('—'))),
    });
    picker.append(button('Refresh', () => list.reload()));
    root.append(h('p', { class: 'muted small' }, 'The most recent invocations, newest first; parameters, bodies and secrets are never logged.'), list);
    return root;
  }

  // ---------- views: events ----------

  const EVENT_TYPES = ['connector.created', 'connector.updated', 'connector.deleted', 'action.created', 'action.updated',
    'action.deleted', 'action.invoked', 'action.failed', 'connection.created', 'connection.updated', 'connection.deleted',
    'connection.reauth_required', 'api_key.created', 'api_key.updated', 'api_key.revoked', 'webhook.test',
    'toolset.created', 'toolset.updated', 'toolset.deleted', 'usage.budget_alert', 'usage.budget_exhausted',
    'llm.fallback_used', 'llm.provider_unhealthy', 'llm.provider_recovered', 'llm.models_changed',
    'ratelimit.exceeded', 'llm.request.completed'];

  function eventSummary(ev) {
    const d = ev.data || {};
    const parts = [];
    if (d.connector && typeof d.connector === 'string') parts.push(d.connector);
    if (d.name && typeof d.name === 'string') parts.push(d.name);
    else if (d.id && typeof d.id === 'string') parts.push(d.id);
    return parts.join(' · ') || '';
  }

  function viewEvents(type) {
    const root = viewRoot('events', 'Event log');
    const typeId = uid('type');
    const orderId = uid('order');
    const sel = h('select', { id: typeId, name: 'type' }, h('option', { value: '' }, 'All types'),
      EVENT_TYPES.map((t) => h('option', { value: t }, t)));
    if (type && !EVENT_TYPES.includes(type)) sel.append(h('option', { value: type }, type));
    sel.value = type || '';
    const order = h('select', { id: orderId, name: 'order' }, h('option', { value: 'newest' }, 'Newest first'), h('option', { value: 'oldest' }, 'Oldest first'));
    root.append(h('div', { class: 'toolbar' }, h('label', { for: typeId }, 'Type'), sel, h('label', { for: orderId }, 'Order'), order));
    const holder = h('div');
    root.append(holder);
    const render = () => {
      holder.replaceChildren(paged({
        path: '/v1/events',
        params: { type: sel.value, order: order.value === 'oldest' ? 'oldest' : '' },
        head: ['Time', 'Type', 'Subject', 'Event ID'],
        empty: sel.value ? `No ${sel.value} events retained.` : 'No events yet.',
        tableClass: 'clickable',
        row: (ev) => {
          const detail = h('tr', { class: 'detail-row', hidden: true }, h('td', { colspan: 4 }, pre(json(ev), 'code event-json')));
          const tr = h('tr', { class: 'event-row', tabindex: '0', 'aria-expanded': 'false', 'data-event': ev.id, title: 'Show the event' },
            h('td', null, when(ev.createdAt)),
            h('td', null, badge(ev.type, 'event-type')),
            h('td', null, eventSummary(ev)),
            h('td', null, code(ev.id)));
          const toggle = () => {
            detail.hidden = !detail.hidden;
            tr.setAttribute('aria-expanded', String(!detail.hidden));
            tr.classList.toggle('open', !detail.hidden);
          };
          tr.addEventListener('click', toggle);
          tr.addEventListener('keydown', (e) => {
            if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); toggle(); }
          });
          return [tr, detail];
        },
      }));
    };
    sel.addEventListener('change', () => {
      history.replaceState(null, '', sel.value ? `#/events/${enc(sel.value)}` : '#/events');
      render();
    });
    order.addEventListener('change', render);
    render();
    return root;
  }

  // ---------- views: webhooks ----------

  function webhookState(w) {
    if (!w.enabled) return badge(w.disabledReason ? 'disabled by server' : 'disabled', 'status-disabled');
    if (w.failingSince) return badge('failing', 'status-failing');
    return badge('enabled', 'status-enabled');
  }

  function viewWebhooks() {
    const root = viewRoot('webhooks', 'Webhooks');
    root.append(paged({
      path: '/v1/webhooks',
      head: ['URL', 'Events', 'State', 'Description', 'Updated'],
      empty: 'No webhooks yet. Create one with the API (POST /v1/webhooks) or Terraform (switchboard_webhook).',
      row: (w) => h('tr', { 'data-webhook': w.id },
        h('td', { class: 'url' }, h('a', { href: `#/webhooks/${enc(w.id)}` }, w.url)),
        h('td', null, (w.events || []).map((e) => badge(e, 'event-type'))),
        h('td', null, webhookState(w)),
        h('td', null, w.description || muted('—')),
        h('td', null, when(w.updatedAt))),
    }));
    return root;
  }

  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

  function viewWebhook(id) {
    const root = viewRoot('webhook', 'Webhook', [['Webhooks', '#/webhooks'], [id]]);
    const config = h('div', null, loading());
    const testOut = h('div', { 'aria-live': 'polite' });
    const statusId = uid('dstatus');
    const statusSel = h('select', { id: statusId, name: 'status' }, h('option', { value: '' }, 'All'),
      ['pending', 'succeeded', 'failed'].map((v) => h('option', { value: v }, v)));
    const deliveriesHolder = h('div');
    let deliveries;

    // watch re-reads a pending delivery a few times so its row shows the outcome.
    async function watch(tr, d) {
      for (const wait of [1500, 4000, 10000]) {
        if (d.status !== 'pending' || !tr.isConnected) return;
        await sleep(wait);
        if (!tr.isConnected) return;
        try {
          d = await api('GET', `/v1/webhooks/${enc(id)}/deliveries/${enc(d.id)}`);
        } catch (_) { return; }
        const next = deliveryRow(d);
        tr.replaceWith(next);
        tr = next;
        if (d.status !== 'pending') loadConfig();
      }
    }

    function deliveryRow(d) {
      const tr = h('tr', { 'data-delivery': d.id, class: `delivery status-row-${d.status}` });
      const retryable = d.status === 'failed' || (d.status === 'pending' && d.lastError);
      const out = h('div', { class: 'row-error' });
      const retry = retryable ? button('Retry', async () => {
        out.replaceChildren();
        try {
          const nd = await api('POST', `/v1/webhooks/${enc(id)}/deliveries/${enc(d.id)}/retry`);
          const next = deliveryRow(nd);
          next.classList.add('flash');
          tr.replaceWith(next);
          if (nd.status === 'pending') watch(next, nd); else loadConfig();
        } catch (e) {
          out.replaceChildren(errorBox(e));
        }
      }, 'retry') : null;
      add(tr, [
        h('td', null, when(d.createdAt)),
        h('td', null, badge(d.eventType, 'event-type'), h('div', null, code(d.eventId))),
        h('td', null, statusBadge(d.status)),
        h('td', { class: 'num' }, fmtInt(d.attempts)),
        h('td', null, httpBadge(d.lastResponseCode)),
        h('td', { class: 'last-error' }, d.lastError || muted('—')),
        h('td', null, d.lastAttemptAt ? when(d.lastAttemptAt) : muted('—'), d.lastDurationMs != null ? h('div', { class: 'muted small' }, `${fmtInt(d.lastDurationMs)} ms`) : null),
        h('td', null, d.status === 'pending' && d.nextAttemptAt ? when(d.nextAttemptAt, true) : muted('—')),
        h('td', { class: 'actions' }, retry, out),
      ]);
      return tr;
    }

    const renderDeliveries = () => {
      deliveries = paged({
        path: `/v1/webhooks/${enc(id)}/deliveries`,
        params: { status: statusSel.value },
        head: ['Created', 'Event', 'Status', 'Attempts', 'Last response', 'Last error', 'Last attempt', 'Next attempt', ''],
        empty: statusSel.value ? `No ${statusSel.value} deliveries.` : 'No deliveries yet.',
        row: deliveryRow,
      });
      deliveriesHolder.replaceChildren(deliveries);
    };
    statusSel.addEventListener('change', renderDeliveries);

    const testBtn = button('Send test event', async () => {
      testOut.replaceChildren(loading('Queueing a webhook.test event…'));
      try {
        const d = await api('POST', `/v1/webhooks/${enc(id)}/test`);
        testOut.replaceChildren(h('p', { class: 'success', role: 'status' }, 'Test event queued: ', code(d.eventId), '. Its delivery is shown below.'));
        if (!statusSel.value || statusSel.value === d.status) {
          const [tr] = deliveries.prepend(d);
          tr.classList.add('flash');
          watch(tr, d);
        }
      } catch (e) {
        testOut.replaceChildren(errorBox(e));
      }
    }, 'primary');

    root.append(config,
      section('Test', h('p', { class: 'muted small' }, 'Sends a webhook.test event to this webhook only, whatever its event list.'), h('div', { class: 'form-actions' }, testBtn), testOut),
      section('Deliveries', h('div', { class: 'toolbar' }, h('label', { for: statusId }, 'Status'), statusSel,
        button('Refresh', () => deliveries.reload())), deliveriesHolder));
    renderDeliveries();

    // loadConfig (re)draws the configuration: a delivery's outcome can
    // change the webhook's state (failing since, disabled).
    const loadConfig = () => api('GET', `/v1/webhooks/${enc(id)}`).then((w) => {
      root.h1.textContent = 'Webhook ';
      root.h1.append(h('span', { class: 'muted subtitle' }, w.url));
      config.replaceChildren(section('Configuration', dl([
        ['ID', code(w.id)],
        ['URL', code(w.url)],
        ['Events', (w.events || []).map((e) => badge(e, 'event-type'))],
        ['State', webhookState(w)],
        ['Disabled because', w.disabledReason],
        ['Disabled at', w.disabledAt ? when(w.disabledAt) : null],
        ['Failing since', w.failingSince ? when(w.failingSince, true) : null],
        ['Previous secret valid until', w.previousSecretExpiresAt ? when(w.previousSecretExpiresAt, true) : null],
        ['Description', w.description],
        ['Version', fmtInt(w.version)],
        ['Created', when(w.createdAt)],
        ['Updated', when(w.updatedAt)],
      ]), h('p', { class: 'muted small' }, 'The signing secret is write-only and never shown.')));
      if (!w.enabled) testOut.replaceChildren(h('p', { class: 'note' }, 'This webhook is disabled; enable it (PUT /v1/webhooks/{id} with "enabled": true) before sending a test event.'));
    }, (e) => config.replaceChildren(errorBox(e)));
    loadConfig();
    return root;
  }

  // ---------- views: API keys ----------

  function spendCell(k) {
    const sp = k.spend;
    if (!sp) return k.budget ? muted('no spend yet') : muted('no budget');
    const frac = sp.budgetUsd > 0 ? sp.spentUsd / sp.budgetUsd : 0;
    const cls = frac >= 1 ? 'over' : frac >= 0.8 ? 'high' : '';
    return h('div', { class: `spend ${cls}`.trim() },
      h('meter', { min: 0, max: sp.budgetUsd, value: Math.min(sp.spentUsd, sp.budgetUsd), low: sp.budgetUsd * 0.8, high: sp.budgetUsd * 0.95, optimum: 0, title: `${Math.round(frac * 100)}% of the budget` }),
      h('div', null, `${fmtUsd(sp.spentUsd)} of ${fmtUsd(sp.budgetUsd)}`, h('span', { class: 'muted' }, ` (${sp.period})`)),
      sp.resetAt ? h('div', { class: 'muted small' }, 'resets ', when(sp.resetAt, true)) : null);
  }

  function listOrAll(list, all) {
    return Array.isArray(list) && list.length ? spaced(list.map((x) => code(x))) : muted(all);
  }

  function viewApiKeys() {
    const root = viewRoot('api-keys', 'API keys');
    root.append(h('p', { class: 'muted small' }, 'Secrets are shown only when a key is created. Spend is for the budget\'s current period.'),
      paged({
        path: '/v1/api-keys',
        head: ['Name', 'Prefix', 'Scopes', 'Rate limit', 'Models', 'Connectors', 'Budget', 'Spend', 'Connection', 'Expires', 'Created'],
        empty: 'No API keys.',
        tableClass: 'wide',
        row: (k) => h('tr', { 'data-key': k.id },
          h('td', null, h('div', null, k.name, k.id === PRINCIPAL ? badge('you', 'you') : null), h('div', { class: 'muted small' }, code(k.id))),
          h('td', null, code(k.prefix)),
          h('td', null, (k.scopes || []).map((x) => badge(x, `scope scope-${x.replace(':', '-')}`))),
          h('td', null, k.rateLimit && (k.rateLimit.requestsPerMinute || k.rateLimit.tokensPerMinute)
            ? [k.rateLimit.requestsPerMinute ? h('div', null, `${fmtInt(k.rateLimit.requestsPerMinute)} req/min`) : null,
              k.rateLimit.tokensPerMinute ? h('div', null, `${fmtInt(k.rateLimit.tokensPerMinute)} tokens/min`) : null]
            : muted('server default')),
          h('td', null, listOrAll(k.models, 'all models')),
          h('td', null, listOrAll(k.connectors, 'all connectors')),
          h('td', null, k.budget ? [h('div', null, `${fmtUsd(k.budget.usd)} / ${k.budget.period}`),
            (k.budget.alertAt || []).length ? h('div', { class: 'muted small' }, `alerts at ${k.budget.alertAt.map((f) => `${Math.round(f * 100)}%`).join(', ')}`) : null] : muted('none')),
          h('td', null, spendCell(k)),
          h('td', null, k.connection ? code(k.connection) : muted('caller chooses')),
          h('td', null, k.expiresAt ? when(k.expiresAt, true) : muted('never')),
          h('td', null, when(k.createdAt))),
      }));
    return root;
  }

  // ---------- views: models ----------

  // limited runs at most n promises at once (pricing look-ups).
  function limiter(n) {
    let active = 0;
    const queue = [];
    const next = () => {
      if (active >= n || !queue.length) return;
      active++;
      const [fn, resolve, reject] = queue.shift();
      fn().then(resolve, reject).finally(() => { active--; next(); });
    };
    return (fn) => new Promise((resolve, reject) => { queue.push([fn, resolve, reject]); next(); });
  }

  function viewModels() {
    const root = viewRoot('models', 'Models');
    const capId = uid('cap');
    const provId = uid('prov');
    const cap = h('select', { id: capId, name: 'capability' }, h('option', { value: '' }, 'Any'),
      ['chat', 'code', 'reasoning', 'vision', 'embeddings', 'completion'].map((c) => h('option', { value: c }, c)));
    const prov = h('input', { id: provId, name: 'provider', type: 'text', placeholder: 'e.g. openai', autocomplete: 'off', spellcheck: 'false' });
    const form = h('form', { class: 'toolbar' }, h('label', { for: capId }, 'Capability'), cap,
      h('label', { for: provId }, 'Provider'), prov, h('button', { type: 'submit' }, 'Filter'));
    const holder = h('div');
    root.append(form, h('p', { class: 'muted small' }, 'Prices are USD per million tokens.'), holder);
    const render = () => {
      const run = limiter(4);
      holder.replaceChildren(paged({
        path: '/v1/models',
        params: { capability: cap.value, provider: prov.value.trim() },
        head: ['Model', 'Capabilities', 'Max tokens', 'Dimensions', 'Input', 'Output', 'Cached input'],
        empty: 'No models match.',
        row: (m) => {
          const cells = [h('td', { class: 'num price' }, muted('…')), h('td', { class: 'num price' }, muted('…')), h('td', { class: 'num price' }, muted('…'))];
          run(() => api('GET', `/v1/models/${enc(m.id)}`)).then((d) => {
            const p = d && d.pricing;
            if (!p) {
              cells[0].replaceChildren(muted('not priced'));
              cells[1].replaceChildren(muted('—'));
              cells[2].replaceChildren(muted('—'));
              return;
            }
            cells[0].textContent = fmtUsd(p.input);
            cells[1].textContent = fmtUsd(p.output);
            cells[2].replaceChildren(p.cachedInput != null ? fmtUsd(p.cachedInput) : muted('= input'));
          }, (e) => {
            cells.forEach((c) => c.replaceChildren(muted('?')));
            cells[0].title = e.message;
          });
          return h('tr', { 'data-model': m.id },
            h('td', null, code(m.id)),
            h('td', null, (m.capabilities || []).map((c) => badge(c, `cap cap-${c}`))),
            h('td', { class: 'num' }, m.maxTokens != null ? fmtInt(m.maxTokens) : muted('—')),
            h('td', { class: 'num' }, m.dimensions != null ? fmtInt(m.dimensions) : muted('—')),
            cells);
        },
      }));
    };
    form.addEventListener('submit', (ev) => { ev.preventDefault(); render(); });
    cap.addEventListener('change', render);
    render();
    return root;
  }

  // ---------- views: usage ----------

  const METRICS = [
    { key: 'totalTokens', title: 'Tokens', unit: 'tokens', int: true },
    { key: 'requests', title: 'Requests', unit: 'requests', int: true },
    { key: 'costUsd', title: 'Cost', unit: 'USD', int: false },
  ];
  const MAX_SERIES = 8;

  function niceStep(x, int) {
    if (!(x > 0)) return int ? 1 : 0.25;
    const p = 10 ** Math.floor(Math.log10(x));
    const n = x / p;
    let step = (n <= 1 ? 1 : n <= 2 ? 2 : n <= 2.5 ? 2.5 : n <= 5 ? 5 : 10) * p;
    if (int) step = Math.max(1, Math.ceil(step));
    return step;
  }

  function axisLabel(v, metric) {
    if (metric.key === 'costUsd') {
      if (v === 0) return '$0';
      return v < 1 ? `$${v.toFixed(10).replace(/\.?0+$/, '')}` : `$${compact.format(v)}`;
    }
    return compact.format(v);
  }

  // usageChart draws one stacked bar chart: buckets along x, one stack of
  // series per bucket. values[b][s] is the metric of series s in bucket b.
  function usageChart(metric, buckets, series, values, bucketLabel, width) {
    const W = Math.max(320, Math.min(1600, Math.round(width || 720)));
    const H = 220;
    const m = { l: 64, r: 12, t: 14, b: 42 };
    const pw = W - m.l - m.r;
    const ph = H - m.t - m.b;
    const totals = values.map((row) => row.reduce((a, v) => a + v, 0));
    const max = Math.max(0, ...totals);
    const step = niceStep(max / 4, metric.int);
    const top = step * 4;
    const y = (v) => m.t + ph - (v / top) * ph;
    const band = pw / buckets.length;
    const bw = Math.max(1, band * 0.72);
    const svg = s('svg', {
      class: `usage-chart metric-${metric.key}`, viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: 'img',
      'aria-label': `${metric.title} per ${bucketLabel.unit}, stacked by ${bucketLabel.series}`,
      preserveAspectRatio: 'xMinYMin meet',
    });
    const grid = s('g', { class: 'grid' });
    const axis = s('g', { class: 'axis' });
    for (let i = 0; i <= 4; i++) {
      const v = step * i;
      const yy = y(v);
      grid.append(s('line', { x1: m.l, x2: W - m.r, y1: yy, y2: yy, class: i ? 'gridline' : 'baseline' }));
      axis.append(s('text', { x: m.l - 6, y: yy, class: 'tick y', 'text-anchor': 'end', 'dominant-baseline': 'middle' }, axisLabel(v, metric)));
    }
    const every = Math.ceil(buckets.length / Math.max(2, Math.floor(pw / 64)));
    buckets.forEach((b, i) => {
      const last = i === buckets.length - 1 && i % every >= every / 2;
      if (i % every !== 0 && !last) return;
      const xx = m.l + band * i + band / 2;
      axis.append(s('line', { x1: xx, x2: xx, y1: m.t + ph, y2: m.t + ph + 4, class: 'tickmark' }));
      axis.append(s('text', { x: xx, y: m.t + ph + 16, class: 'tick x', 'text-anchor': 'middle' }, bucketLabel.short(b)));
    });
    axis.append(s('text', { x: m.l + pw / 2, y: H - 4, class: 'axis-title', 'text-anchor': 'middle' }, `${bucketLabel.unit} (UTC)`));
    axis.append(s('text', { x: 12, y: m.t + ph / 2, class: 'axis-title', 'text-anchor': 'middle', transform: `rotate(-90 12 ${m.t + ph / 2})` }, metric.unit));
    const bars = s('g', { class: 'bars' });
    values.forEach((row, bi) => {
      let acc = 0;
      row.forEach((v, si) => {
        if (!(v > 0)) return;
        const y0 = y(acc);
        acc += v;
        const y1 = y(acc);
        const hgt = Math.max(1, y0 - y1);
        bars.append(s('rect', {
          class: `bar series-${series[si].color}`, x: (m.l + band * bi + (band - bw) / 2).toFixed(2), y: (y0 - hgt).toFixed(2),
          width: bw.toFixed(2), height: hgt.toFixed(2), 'data-series': series[si].name, 'data-value': v,
        }, s('title', null, `${bucketLabel.long(buckets[bi])} — ${series[si].name}: ${metric.key === 'costUsd' ? fmtUsd(v) : fmtInt(v)}`)));
      });
    });
    svg.append(grid, bars, axis);
    return svg;
  }

  function legend(series) {
    return h('ul', { class: 'legend', 'aria-label': 'Legend' }, series.map((x) =>
      h('li', null, h('span', { class: `swatch series-${x.color}`, 'aria-hidden': 'true' }), x.name)));
  }

  function viewUsage() {
    const root = viewRoot('usage', 'Usage');
    const rangeId = uid('range');
    const splitId = uid('split');
    const range = h('select', { id: rangeId, name: 'range' },
      h('option', { value: '24h' }, 'Last 24 hours, by hour'), h('option', { value: '30d' }, 'Last 30 days, by day'));
    const split = h('select', { id: splitId, name: 'split' },
      h('option', { value: 'model' }, 'Per model'), h('option', { value: 'key' }, 'Per API key'));
    const out = h('div');
    root.append(h('div', { class: 'toolbar' }, h('label', { for: rangeId }, 'Range'), range, h('label', { for: splitId }, 'Split'), split,
      button('Refresh', () => load())), out);
    let gen = 0;

    async function load() {
      const mine = ++gen;
      const hourly = range.value === '24h';
      const stepMs = hourly ? 3600000 : 86400000;
      const n = hourly ? 24 : 30;
      const now = Date.now();
      const start = Math.floor(now / stepMs) * stepMs - (n - 1) * stepMs;
      const dim = split.value === 'key' ? 'key' : 'model';
      const period = hourly ? 'hour' : 'day';
      const from = new Date(start).toISOString().replace(/\.\d{3}Z$/, 'Z');
      out.replaceChildren(loading('Loading usage…'));
      let rep;
      try {
        rep = await api('GET', `/v1/usage${qs({ from, groupBy: `${period},${dim}` })}`);
      } catch (e) {
        if (mine === gen) out.replaceChildren(errorBox(e));
        return;
      }
      if (mine !== gen) return;
      const rows = rep.data || [];
      const buckets = Array.from({ length: n }, (_, i) => start + i * stepMs);
      const bucketLabel = {
        unit: hourly ? 'Hour' : 'Day',
        series: dim === 'key' ? 'API key' : 'model',
        short: (t) => (hourly
          ? new Date(t).toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit', hour12: false, timeZone: 'UTC' })
          : new Date(t).toLocaleDateString(undefined, { month: 'short', day: 'numeric', timeZone: 'UTC' })),
        long: (t) => new Date(t).toLocaleString(undefined, hourly
          ? { month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', hour12: false, timeZone: 'UTC' }
          : { year: 'numeric', month: 'short', day: 'numeric', timeZone: 'UTC' }) + ' UTC',
      };
      // Series: the biggest MAX_SERIES by tokens (then requests); the rest as "Other".
      const byName = new Map();
      for (const r of rows) {
        const name = r[dim] || '(none)';
        const t = byName.get(name) || { name, tokens: 0, requests: 0 };
        t.tokens += r.totalTokens || 0;
        t.requests += r.requests || 0;
        byName.set(name, t);
      }
      let series = [...byName.values()].sort((a, b) => b.tokens - a.tokens || b.requests - a.requests || a.name.localeCompare(b.name));
      const other = series.length > MAX_SERIES ? series.slice(MAX_SERIES - 1) : [];
      if (other.length) series = series.slice(0, MAX_SERIES - 1).concat([{ name: `Other (${other.length})`, other: true }]);
      series.forEach((x, i) => { x.color = x.other ? 'other' : String(i); });
      const index = new Map(series.map((x, i) => [x.name, i]));
      const otherIdx = other.length ? series.length - 1 : -1;
      const charts = h('div', { class: 'charts' });
      const chartWidth = out.clientWidth - 30; // the figure's padding and border
      const summary = h('div', { class: 'totals' },
        [['Requests', fmtInt(rep.total && rep.total.requests)], ['Prompt tokens', fmtInt(rep.total && rep.total.promptTokens)],
          ['Completion tokens', fmtInt(rep.total && rep.total.completionTokens)], ['Total tokens', fmtInt(rep.total && rep.total.totalTokens)],
          ['Cost', fmtUsd(rep.total && rep.total.costUsd)]].map(([k, v]) => h('div', { class: 'total' }, h('span', { class: 'muted small' }, k), h('strong', null, v))));
      for (const metric of METRICS) {
        const values = buckets.map(() => series.map(() => 0));
        for (const r of rows) {
          const bi = Math.round((Date.parse(r.period) - start) / stepMs);
          if (!(bi >= 0 && bi < n)) continue;
          const si = index.has(r[dim] || '(none)') ? index.get(r[dim] || '(none)') : otherIdx;
          if (si < 0) continue;
          values[bi][si] += Number(r[metric.key]) || 0;
        }
        charts.append(h('figure', { class: 'chart', 'data-metric': metric.key },
          h('figcaption', null, metric.title), usageChart(metric, buckets, series, values, bucketLabel, chartWidth), legend(series)));
      }
      const table = h('div', { class: 'table-wrap' }, h('table', { class: 'table usage-table' },
        h('thead', null, h('tr', null, [bucketLabel.unit + ' (UTC)', dim === 'key' ? 'API key' : 'Model', 'Requests', 'Prompt tokens', 'Completion tokens', 'Total tokens', 'Cost']
          .map((t) => h('th', { scope: 'col' }, t)))),
        h('tbody', null, rows.map((r) => h('tr', null,
          h('td', null, r.period ? bucketLabel.long(Date.parse(r.period)) : '—'),
          h('td', null, code(r[dim] || '(none)'), dim === 'key' && r.key === PRINCIPAL ? badge('you', 'you') : null),
          h('td', { class: 'num' }, fmtInt(r.requests)),
          h('td', { class: 'num' }, fmtInt(r.promptTokens)),
          h('td', { class: 'num' }, fmtInt(r.completionTokens)),
          h('td', { class: 'num' }, fmtInt(r.totalTokens)),
          h('td', { class: 'num' }, fmtUsd(r.costUsd))))),
        rep.total ? h('tfoot', null, h('tr', null, h('th', { scope: 'row', colspan: 2 }, 'Total'),
          h('td', { class: 'num' }, fmtInt(rep.total.requests)), h('td', { class: 'num' }, fmtInt(rep.total.promptTokens)),
          h('td', { class: 'num' }, fmtInt(rep.total.completionTokens)), h('td', { class: 'num' }, fmtInt(rep.total.totalTokens)),
          h('td', { class: 'num' }, fmtUsd(rep.total.costUsd)))) : null));
      out.replaceChildren();
      add(out, [summary, rows.length ? null : h('p', { class: 'empty' }, 'No model usage in this period.'),
        charts, rows.length ? section('Numbers', table) : null]);
    }
    range.addEventListener('change', load);
    split.addEventListener('change', load);
    load();
    return root;
  }

  // ---------- shell and routing ----------

  const NAV = [
    ['connectors', 'Connectors', ['connectors:read', 'connectors:write']],
    ['connections', 'Connections', ['connectors:read', 'connectors:write']],
    ['invocations', 'Invocations', ['connectors:read', 'connectors:write']],
    ['events', 'Events', ['webhooks:write']],
    ['webhooks', 'Webhooks', ['webhooks:write']],
    ['api-keys', 'API keys', ['admin']],
    ['models', 'Models', ['llm']],
    ['usage', 'Usage', null],
  ];

  const navLinks = new Map();
  const nav = h('nav', { class: 'sidenav', 'aria-label': 'Console' },
    h('ul', null, NAV.map(([route, label, scopes]) => {
      const locked = scopes && !can(...scopes);
      const a = h('a', {
        href: `#/${route}`, class: locked ? 'locked' : '', 'data-route': route,
        title: locked ? `Needs the ${scopes.join(' or ')} scope` : null,
      }, label);
      navLinks.set(route, a);
      return h('li', null, a);
    })),
    PRINCIPAL ? h('div', { class: 'whoami' }, h('span', { class: 'muted small' }, 'Signed in as'), code(PRINCIPAL),
      SCOPES.size ? h('div', { class: 'scopes' }, [...SCOPES].map((x) => badge(x, 'scope'))) : null) : null);
  const content = h('div', { class: 'content', id: 'view' });
  app.replaceChildren(h('div', { class: 'layout' }, nav, content));

  const VIEWS = {
    connectors: (arg) => (arg ? viewConnector(arg) : viewConnectors()),
    connections: viewConnections,
    invocations: viewInvocations,
    events: viewEvents,
    webhooks: (arg) => (arg ? viewWebhook(arg) : viewWebhooks()),
    'api-keys': viewApiKeys,
    models: viewModels,
    usage: viewUsage,
  };

  let firstRoute = true;
  async function route() {
    let parts;
    try {
      parts = window.location.hash.replace(/^#\/?/, '').split('/').filter(Boolean).map(decodeURIComponent);
    } catch (_) {
      parts = [];
    }
    const name = VIEWS[parts[0]] ? parts[0] : 'connectors';
    const arg = VIEWS[parts[0]] ? parts.slice(1).join('/') : '';
    for (const [r, a] of navLinks) {
      if (r === name) {
        a.setAttribute('aria-current', 'page');
        a.scrollIntoView({ block: 'nearest', inline: 'nearest' });
      }
      else a.removeAttribute('aria-current');
    }
    let view;
    try {
      view = await VIEWS[name](arg);
    } catch (e) {
      view = h('section', { class: 'view', 'data-view': name }, errorBox(e));
    }
    content.replaceChildren(view);
    const label = (NAV.find((n) => n[0] === name) || [])[1] || 'Console';
    document.title = `${arg ? `${arg} · ` : ''}${label} · Switchboard`;
    const heading = view.querySelector('h1');
    if (heading && !firstRoute) heading.focus({ preventScroll: true });
    if (!firstRoute) window.scrollTo(0, 0);
    firstRoute = false;
  }

  window.addEventListener('hashchange', route);
  route();
})();
