#include "politeproxy/admin/status_page.hpp"

namespace politeproxy {

std::string_view status_page_html() {
    return R"html(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>politeproxy</title>
<style>
  body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #1d2329; }
  h1 { font-size: 1.3em; margin: 0 0 .3em; }
  #summary { margin: 0 0 1em; color: #44505c; }
  #summary b { color: #1d2329; }
  .down { color: #b3261e; font-weight: 600; }
  table { border-collapse: collapse; width: 100%; }
  th, td { padding: .25em .6em; border-bottom: 1px solid #e2e6ea; text-align: right; white-space: nowrap; }
  th { background: #f3f5f7; position: sticky; top: 0; }
  td.key, th.key, td.text { text-align: left; }
  td.text { white-space: normal; max-width: 28em; }
  tr.waiting td { background: #fff8e1; }
  tr.paused td { background: #fdecea; }
  .muted { color: #8a949e; }
</style>
</head>
<body>
<h1>politeproxy</h1>
<p id="summary">loading /hosts &hellip;</p>
<table>
  <thead><tr>
    <th class="key">host</th><th>waiting</th><th>in flight</th><th>fleet in flight</th>
    <th>limit</th><th>rate /s</th><th>paused</th><th class="key">last change</th>
    <th>p95</th><th>protocol</th><th class="key">override reason</th>
  </tr></thead>
  <tbody id="hosts"></tbody>
</table>
<p id="more" class="muted"></p>
<script src="/status.js"></script>
</body>
</html>
)html";
}

std::string_view status_page_script() {
    return R"js('use strict';
// Draws /hosts: hosts with requests waiting first, then in flight. Values go in as text.
const shown = 500;
const cell = (tr, text, cls) => {
  const td = tr.insertCell();
  td.textContent = text;
  if (cls) td.className = cls;
};
const num = (x, digits) => {
  if (x === null || x === undefined) return '-';
  const s = (+x).toFixed(digits);
  return s.includes('.') ? s.replace(/0+$/, '').replace(/\.$/, '') : s;
};
const seconds = (s) => s === null ? '-' : s >= 1 ? num(s, 1) + ' s' : num(s * 1000, 0) + ' ms';
const of = (now, configured, digits) => now === configured ? num(now, digits) : num(now, digits) + ' / ' + num(configured, digits);

async function refresh() {
  const summary = document.getElementById('summary');
  try {
    const res = await fetch('/hosts', { cache: 'no-store' });
    const hosts = await res.json();
    const fleet = res.headers.get('Politeproxy-Fleet-Store');
    hosts.sort((a, b) => b.waiting - a.waiting || b.in_flight - a.in_flight || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
    let inFlight = 0, waiting = 0, paused = 0;
    for (const h of hosts) { inFlight += h.in_flight; waiting += h.waiting; if (h.paused_seconds > 0) paused++; }
    summary.replaceChildren();
    const add = (label, value, cls) => {
      const b = document.createElement('b');
      b.textContent = value;
      if (cls) b.className = cls;
      summary.append(label, b, '  ');
    };
    add('hosts ', String(hosts.length));
    add('in flight ', String(inFlight));
    add('waiting ', String(waiting));
    add('paused ', String(paused));
    add('fleet store ', fleet || 'off', fleet === 'down' ? 'down' : '');
    add('updated ', new Date().toLocaleTimeString());
    const body = document.createElement('tbody');
    body.id = 'hosts';
    for (const h of hosts.slice(0, shown)) {
      const tr = body.insertRow();
      tr.dataset.host = h.key;
      if (h.paused_seconds > 0) tr.className = 'paused';
      else if (h.waiting > 0) tr.className = 'waiting';
      cell(tr, h.key, 'key');
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
      cell(tr, h.override_reason === null ? '' : h.override_reason, 'text');
    }
    document.getElementById('hosts').replaceWith(body);
    document.getElementById('more').textContent =
      hosts.length > shown ? (hosts.length - shown) + ' quieter hosts not shown' : '';
  } catch (e) {
    summary.replaceChildren();
    const b = document.createElement('b');
    b.className = 'down';
    b.textContent = 'the proxy does not answer /hosts (' + e + ')';
    summary.append(b);
  }
}
refresh();
setInterval(refresh, 1000);
)js";
}

std::string_view status_page_policy() {
    return "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'unsafe-inline'; "
           "frame-ancestors 'none'; base-uri 'none'; form-action 'none'";
}

}  // namespace politeproxy
