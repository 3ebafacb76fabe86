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
  th, td { padding: .25em .45em; border-bottom: 1px solid #e2e6ea; text-align: right; white-space: nowrap; }
  th { background: #f3f5f7; position: sticky; top: 0; }
  td.key, th.key, td.text { text-align: left; }
  td.text { white-space: normal; max-width: 28em; }
  td.text, td.host { white-space: normal; overflow-wrap: anywhere; }  /* these give way on a narrow screen */
  td.host { min-width: 10em; }
  tr.waiting td { background: #fff8e1; }
  tr.paused td { background: #fdecea; }
  .muted { color: #8a949e; }
  h2 { font-size: 1.1em; margin: 1.5em 0 .3em; }
  #controls { display: flex; flex-wrap: wrap; gap: .4em 1.2em; align-items: center; margin: 0 0 1em;
              padding: .5em .7em; background: #f3f5f7; border-radius: 4px; }
  #controls input, #controls select, td button { font: inherit; }
  #controls input[type=number] { width: 6em; }
  td button { font-size: .8em; padding: 0 .3em; margin-left: .15em; }
  #answer { flex-basis: 100%; margin: 0; }
  #answer:empty { display: none; }
  #answer.error { color: #b3261e; font-weight: 600; }
  #answer.ok { color: #1e6b2e; }
</style>
</head>
<body>
<h1>politeproxy</h1>
<p id="summary">loading &hellip;</p>
<div id="controls">
  <label>token <input id="token" type="password" autocomplete="off" spellcheck="false" size="22"></label>
  <label>reason <input id="reason" maxlength="500" size="32"></label>
  <label>pause for <select id="pause-for">
    <option value="1m">1 min</option><option value="10m" selected>10 min</option><option value="1h">1 h</option>
  </select></label>
  <label>concurrency <input id="concurrency" type="number" min="1" step="1"></label>
  <label>rate /s <input id="rate" type="number" min="0" step="any"></label>
  <span class="muted">the buttons of a row use these fields; the token stays in this tab only;
    resume deletes the host's API override</span>
  <p id="answer" role="status"></p>
</div>
<table>
  <thead><tr>
    <th class="key">host</th><th>waiting</th><th>in flight</th><th>fleet in flight</th>
    <th>limit</th><th>rate /s</th><th>paused</th><th class="key">last change</th>
    <th>p95</th><th>protocol</th><th class="key">override reason</th><th class="key">control</th>
  </tr></thead>
  <tbody id="hosts"></tbody>
</table>
<p id="more" class="muted"></p>
<h2>Overrides</h2>
<table>
  <thead><tr>
    <th class="key">host</th><th class="key">source</th><th>concurrency</th><th>rate /s</th>
    <th>paused until</th><th>expires</th><th class="key">reason</th><th class="key">set by</th>
    <th class="key">control</th>
  </tr></thead>
  <tbody id="overrides"></tbody>
</table>
<p id="overrides-more" class="muted"></p>
<h2>Clients</h2>
<table>
  <thead><tr>
    <th class="key">client</th><th>weight</th><th>waiting</th><th>in flight</th><th>ok</th><th>rejected</th>
    <th>other outcomes</th>
  </tr></thead>
  <tbody id="clients"></tbody>
</table>
<p id="clients-more" class="muted"></p>
<script src="/status.js"></script>
</body>
</html>
)html";
}

std::string_view status_page_policy() {
    return "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'unsafe-inline'; "
           "frame-ancestors 'none'; base-uri 'none'; form-action 'none'";
}

}  // namespace politeproxy
