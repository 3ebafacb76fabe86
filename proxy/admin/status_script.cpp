// The status page's one script (/status.js). Served under status_page_policy(): no inline
// script or handler exists, so every listener is attached here.
#include "politeproxy/admin/status_page.hpp"

namespace politeproxy {

std::string_view status_page_script() {
    return R"js('use strict';
// Draws the busiest hosts (most waiting first, then most in flight: one page of
// /api/hosts, with the totals over all hosts) and /api/overrides every second. Every
// value goes in as text (textContent), never as markup: keys and reasons come from
// clients and operators. The row buttons call the control API with the token typed
// into #token, kept in this tab's sessionStorage only (never a cookie or localStorage).
const shown = 500;              // host rows asked for and drawn, of however many hosts
const overridesShown = 2000;    // override rows fetched, in pages of overridesPage
const overridesPage = 1000;
const tokenKey = 'politeproxy.token';
const $ = (id) => document.getElementById(id);
const cell = (tr, text, cls, title) => {
  const td = tr.insertCell();
  td.textContent = text;
  if (cls) td.className = cls;
  if (title) td.title = title;
};
const num = (x, digits) => {
  if (x === null || x === undefined) return '-';
  const s = (+x).toFixed(digits);
  return s.includes('.') ? s.replace(/0+$/, '').replace(/\.$/, '') : s;
};
const seconds = (s) => s === null ? '-' : s >= 1 ? num(s, 1) + ' s' : num(s * 1000, 0) + ' ms';
const of = (now, configured, digits) => now === configured ? num(now, digits) : num(now, digits) + ' / ' + num(configured, digits);
const span = (s) => s < 60 ? Math.ceil(s) + ' s' : s < 3600 ? Math.round(s / 60) + ' min'
                  : s < 48 * 3600 ? num(s / 3600, 1) + ' h' : Math.round(s / 86400) + ' d';
// An RFC 3339 time from the API as "in 9 min" (the exact time goes in the cell's title).
const until = (at) => {
  if (!at) return '-';
  const left = (Date.parse(at) - Date.now()) / 1000;
  return left > 0 ? 'in ' + span(left) : 'ended';
};

// A table redrawn between a press and its release would swallow the click: hold redraws
// while a pointer is down (at most 2 s, in case its release happens outside the window).
let pressedUntil = 0;
addEventListener('pointerdown', () => { pressedUntil = Date.now() + 2000; }, true);
addEventListener('click', () => { pressedUntil = 0; }, true);
const held = () => Date.now() < pressedUntil;

function buttons(tr, apiOverride) {
  const td = tr.insertCell();
  td.className = 'key';
  for (const [action, label] of [['pause', 'pause'], ['resume', 'resume'], ['limit', 'set limit']]) {
    const b = document.createElement('button');
    b.type = 'button';
    b.dataset.action = action;
    b.textContent = label;
    if (action === 'resume' && !apiOverride) {
      b.disabled = true;
      b.title = 'no API override to delete';
    }
    td.append(b);
  }
}

// Replaces a table body, keeping keyboard focus on the same host's same button.
function swap(id, body) {
  const old = $(id);
  const f = document.activeElement;
  const at = f && f.dataset && f.dataset.action && old.contains(f)
    ? [f.closest('tr').dataset.host, f.dataset.action] : null;
  body.id = id;
  old.replaceWith(body);
  if (!at) return;
  for (const b of body.querySelectorAll('button[data-action]'))
    if (b.dataset.action === at[1] && b.closest('tr').dataset.host === at[0]) b.focus();
}

async function drawHosts() {
  const summary = $('summary');
  try {
    const res = await fetch('/api/hosts?sort=waiting&limit=' + shown, { cache: 'no-store' });
    const { hosts, total } = await res.json();
    if (held()) return;
    const fleet = res.headers.get('Politeproxy-Fleet-Store');
    summary.replaceChildren();
    const add = (label, value, cls) => {
      const b = document.createElement('b');
      b.textContent = value;
      if (cls) b.className = cls;
      summary.append(label, b, '  ');
    };
    add('hosts ', String(total.hosts));
    add('in flight ', String(total.in_flight));
    add('waiting ', String(total.waiting));
    add('paused ', String(total.paused));
    add('fleet store ', fleet || 'off', fleet === 'down' ? 'down' : '');
    add('updated ', new Date().toLocaleTimeString());
    const body = document.createElement('tbody');
    for (const h of hosts) {
      if (h.tracked === false) continue;  // evicted between the page's sort and its row
      const tr = body.insertRow();
      tr.dataset.host = h.key;
      if (h.paused_seconds > 0) tr.className = 'paused';
      else if (h.waiting > 0) tr.className = 'waiting';
      cell(tr, h.key, 'key host');
      cell(tr, String(h.waiting));
      cell(tr, String(h.in_flight));
      cell(tr, h.fleet_in_flight === null ? '-' : String(h.fleet_in_flight));
      const group = h.domain_group;
      cell(tr, of(h.limit, h.configured_limit, 0) + (h.stream_ceiling !== null ? ' (streams ' + h.stream_ceiling + ')' : '') +
               (group ? ' (' + group.key + ' ' + group.in_flight + '/' + group.limit + ')' : ''));
      cell(tr, of(h.rate, h.configured_rate, 3) + (h.rate_source === 'robots' ? ' (robots.txt)' : ''));
      cell(tr, h.paused_seconds > 0 ? seconds(h.paused_seconds) : '-');
      cell(tr, h.last_change ? h.last_change.reason + ', ' + seconds(h.last_change.seconds_ago) + ' ago' : '-', 'key');
      cell(tr, seconds(h.p95_seconds));
      cell(tr, h.upstream_protocol + (h.via.length ? ' via ' + h.via.join(', ') : '') +
               (h.enforce ? '' : ' (observe only)'));
      cell(tr, h.override_reason === null ? '' : h.override_reason, 'text',
           h.override_source ? 'from the ' + h.override_source : '');
      buttons(tr, h.override_source === 'api');
    }
    swap('hosts', body);
    $('more').textContent = total.hosts > hosts.length ? (total.hosts - hosts.length) + ' quieter hosts not shown' : '';
  } catch (e) {
    summary.replaceChildren();
    const b = document.createElement('b');
    b.className = 'down';
    b.textContent = 'the proxy does not answer /api/hosts (' + e + ')';
    summary.append(b);
  }
}

async function drawOverrides() {
  const more = $('overrides-more');
  try {
    const all = [];
    let after = null;
    do {
      const query = '?limit=' + overridesPage + (after === null ? '' : '&after=' + encodeURIComponent(after));
      const res = await fetch('/api/overrides' + query, { cache: 'no-store' });
      if (!res.ok) throw new Error('/api/overrides answered ' + res.status);
      const page = await res.json();
      all.push(...page.overrides);
      after = page.next;
    } while (after !== null && all.length < overridesShown);
    if (held()) return;
    const body = document.createElement('tbody');
    for (const o of all.slice(0, overridesShown)) {
      const tr = body.insertRow();
      tr.dataset.host = o.key;
      tr.dataset.source = o.source;
      if (o.pause_until && Date.parse(o.pause_until) > Date.now()) tr.className = 'paused';
      const api = o.source === 'api';
      cell(tr, o.key, 'key host');
      cell(tr, o.source, 'key');
      cell(tr, o.concurrency === null || o.concurrency === undefined ? '-' : String(o.concurrency));
      cell(tr, num(o.rate, 3));
      cell(tr, until(o.pause_until), '', o.pause_until);
      cell(tr, api ? (o.expires_at ? until(o.expires_at) : 'when deleted') : (o.expired ? 'expired' : '-'),
           '', o.expires_at);
      cell(tr, o.reason || '', 'text');
      cell(tr, o.set_by || '-', 'key', o.set_at ? 'at ' + o.set_at : '');
      if (api) buttons(tr, true);
      else cell(tr, '');
    }
    swap('overrides', body);
    more.textContent = after !== null ? 'more overrides than the ' + overridesShown + ' shown: /api/overrides lists them all'
                     : all.length ? '' : 'none';
  } catch (e) {
    more.textContent = 'the proxy does not answer /api/overrides (' + e + ')';
  }
}

// The clients sharing the proxy (clients:), busiest first: each one's share of the hosts.
async function drawClients() {
  const more = $('clients-more');
  try {
    const res = await fetch('/api/clients', { cache: 'no-store' });
    if (!res.ok) throw new Error('/api/clients answered ' + res.status);
    const clients = (await res.json()).clients;
    const body = document.createElement('tbody');
    for (const c of clients.slice(0, shown)) {
      const tr = body.insertRow();
      if (c.waiting > 0) tr.className = 'waiting';
      cell(tr, c.client, 'key');
      cell(tr, String(c.weight));
      cell(tr, String(c.waiting));
      cell(tr, String(c.in_flight));
      cell(tr, String(c.requests.ok));
      cell(tr, String(c.requests.rejected));
      let other = 0;
      for (const [k, v] of Object.entries(c.requests)) if (k !== 'ok' && k !== 'rejected') other += v;
      cell(tr, String(other));
    }
    swap('clients', body);
    more.textContent = clients.length > shown ? (clients.length - shown) + ' quieter clients not shown'
                     : clients.length ? '' : 'none (clients: is not configured, or nobody has asked yet)';
  } catch (e) {
    more.textContent = 'the proxy does not answer /api/clients (' + e + ')';
  }
}

function refresh() {
  return Promise.all([drawHosts(), drawOverrides(), drawClients()]);
}

// The control API, as the operator's buttons use it.
const say = (cls, text) => {
  const a = $('answer');
  a.className = cls;
  a.textContent = text;
};
// The API reads the key as written (no percent-decoding); keys are host names and
// addresses, whose only character a path would escape is the ':' of IPv6.
const overridePath = (key) => '/api/hosts/' + encodeURIComponent(key).replace(/%3A/g, ':') + '/override';

async function answerOf(res) {
  const text = await res.text();
  try { return JSON.parse(text); } catch (e) { return { error: text.trim() }; }
}

// A PUT replaces the host's API override whole. So that a pause does not drop the limits
// an operator set (nor a new limit a running pause), the change goes on top of `old`,
// keeping the expiry those limits had (a pause alone expires with the pause).
function merged(change, old) {
  const body = Object.assign({}, change);
  if (!old) return body;
  if (!('pause_for' in body) && old.pause_until && Date.parse(old.pause_until) - Date.now() > 2000)
    body.pause_until = old.pause_until;
  if (old.concurrency !== null || old.rate !== null) {
    for (const f of ['concurrency', 'rate'])
      if (body[f] === undefined && old[f] !== null) body[f] = old[f];
    if (old.expires_at) body.expires_in = Math.max(1, Math.ceil((Date.parse(old.expires_at) - Date.now()) / 1000));
  }
  if (body.reason === undefined && old.reason) body.reason = old.reason;
  return body;
}

function change(action) {
  const out = {};
  if (action === 'pause') {
    out.pause_for = $('pause-for').value;
  } else {
    for (const f of ['concurrency', 'rate']) {
      const v = $(f).value.trim();
      if (v !== '') out[f] = Number(v);
    }
    if (!('concurrency' in out) && !('rate' in out)) return null;
  }
  const reason = $('reason').value.trim();
  if (reason) out.reason = reason;
  return out;
}

// What an accepted override holds, in words.
const describe = (o) => [o.concurrency !== null ? 'concurrency ' + o.concurrency : '',
                          o.rate !== null ? 'rate ' + num(o.rate, 3) + '/s' : '',
                          o.pause_until ? 'paused until ' + new Date(o.pause_until).toLocaleTimeString() : '']
                         .filter(Boolean).join(', ');

let busy = false;  // one write at a time
async function act(action, key) {
  if (busy) return;
  const verb = { pause: 'pause', resume: 'resume', limit: 'set limit' }[action];
  let wanted = null;
  if (action !== 'resume' && !(wanted = change(action)))
    return say('error', verb + ' ' + key + ': enter a concurrency and/or a rate first');
  const token = $('token').value.trim();
  const headers = token ? { Authorization: 'Bearer ' + token } : {};
  const path = overridePath(key);
  busy = true;
  say('pending', verb + ' ' + key + ' \u2026');
  try {
    const init = { method: 'DELETE', headers, cache: 'no-store' };
    if (wanted) {
      const now = await fetch(path, { cache: 'no-store' });  // the API override this one goes on top of
      init.method = 'PUT';
      init.headers = Object.assign({ 'Content-Type': 'application/json' }, headers);
      init.body = JSON.stringify(merged(wanted, now.ok ? await now.json() : null));
    }
    const res = await fetch(path, init);
    const answer = await answerOf(res);
    if (res.ok) {
      say('ok', verb + ' ' + key + ': done, ' + (wanted ? describe(answer) : 'its API override is deleted'));
    } else {
      let text = verb + ' ' + key + ': ' + res.status + ' ' + (answer.error || res.statusText);
      if (answer.field) text += ' (field: ' + answer.field + ')';
      if (res.status === 401) text += token ? ' \u2014 the token was not accepted' : ' \u2014 enter a token above';
      say('error', text);
    }
  } catch (e) {
    say('error', verb + ' ' + key + ': the proxy does not answer (' + e + ')');
  } finally {
    busy = false;
  }
  refresh();
}

document.addEventListener('click', (e) => {
  const b = e.target.closest ? e.target.closest('button[data-action]') : null;
  if (b && !b.disabled) act(b.dataset.action, b.closest('tr').dataset.host);
});
try {
  $('token').value = sessionStorage.getItem(tokenKey) || '';
  $('token').addEventListener('input', () => {
    const v = $('token').value;
    if (v) sessionStorage.setItem(tokenKey, v);
    else sessionStorage.removeItem(tokenKey);
  });
} catch (e) {
  // storage refused (a private mode): the token lives in the field only
}
// Again a second after each refresh has ended, never while one is under way (at a million
// hosts a page of /api/hosts takes ~0.35 s to build: tests/bench/host_scale_bench.py).
(async function poll() {
  try { await refresh(); } catch (e) { /* drawn as unreachable by each view */ }
  setTimeout(poll, 1000);
})();
)js";
}

}  // namespace politeproxy
