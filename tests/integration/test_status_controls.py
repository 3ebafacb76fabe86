#!/usr/bin/python3
"""The status page's overrides table and operator controls, driven in headless Chromium
over the DevTools protocol (cdp_pipe.py: --remote-debugging-pipe, no websocket), against
a proxy with admin.token_file:
  A: the overrides table lists the API override put beforehand (api.test: rate, expiry,
     set by alice, its markup-looking reason as text) and the registry's (registry.test),
     the API row with its buttons, the registry row without;
  B: "pause" with no token, then with a wrong one: the page shows the 401 and nothing
     changes (/hosts, /api/overrides); the token is in sessionStorage only (no cookie,
     nothing in localStorage);
  C: with the right token, "pause" (10 min, a reason) really pauses target.test (/hosts:
     override_source "api", paused_seconds ~600); "set limit" with rate 0 shows the 400
     and its field; "set limit" concurrency 1 caps it and keeps the pause; "resume" in the
     overrides table deletes the override (/hosts: no override, not paused, limit 4);
  D: against a proxy without admin.token_file the page still draws, and "pause" shows
     the API's 403 (read-only);
and the page throws nothing and breaks no Content-Security-Policy rule. A screenshot with
the controls in use is written beside the binary (status-controls.png). Without chromium
the test says so and is skipped (exit 0): scripts/install-deps.sh installs it."""
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
from cdp_pipe import Browser  # noqa: E402
from control_api import TOKEN, api, config  # noqa: E402

API_HOST, REGISTRY_HOST, TARGET = "api.test", "registry.test", "target.test"
API_REASON = '<img src=x onerror="document.title=1"> asked by the webmaster'
REGISTRY_REASON = "<b>documented</b> limit"
PAUSE_REASON = "maintenance <script>window.bad=1</script>"
CHROMIUM = shutil.which("chromium")


def rows(b, table):
    """{host: {cells, source, buttons (enabled actions), elements (tags inside the cells)}}."""
    return {r["host"]: r for r in b.js("""[...document.querySelectorAll('#%s tr')].map((tr) => ({
        host: tr.dataset.host, source: tr.dataset.source || null,
        cells: [...tr.cells].map((td) => td.textContent),
        buttons: [...tr.querySelectorAll('button:not([disabled])')].map((x) => x.dataset.action),
        elements: [...tr.querySelectorAll('td *')].map((e) => e.tagName.toLowerCase()) }))""" % table)}


def fill(b, field, value):
    """Types `value` into the page's field `field` (as a person would: an input event follows)."""
    b.js("""(() => { const f = document.getElementById(%s); f.value = %s;
                     f.dispatchEvent(new Event('input', { bubbles: true })); })()"""
         % (json.dumps(field), json.dumps(value)))


def click(b, table, host, action):
    """Clicks a row's button (once it is drawn and enabled); returns the page's answer
    (class, text) once the API answered."""
    b.wait_for("""(() => {
        const tr = [...document.querySelectorAll('#%s tr')].find((r) => r.dataset.host === %s);
        const button = tr && tr.querySelector('button[data-action="%s"]:not([disabled])');
        if (!button) return false;
        const answer = document.getElementById('answer');
        answer.textContent = '';
        answer.className = '';
        button.click();
        return true; })()""" % (table, json.dumps(host), action), what="an enabled %s button for %s" % (action, host))
    return b.wait_for("""(() => { const a = document.getElementById('answer');
        return a.className === 'ok' || a.className === 'error' ? [a.className, a.textContent] : null; })()""",
                      what="the answer to %s %s" % (action, host))


def api_overrides(proxy):
    status, _, body = api(proxy, "GET", "/api/overrides")
    H.check(status == 200, "/api/overrides: %s %s" % (status, body))
    return {o["key"]: o for o in body["overrides"] if o["source"] == "api"}


def test(t):
    if not CHROMIUM:
        print("SKIP status controls: no chromium on PATH (scripts/install-deps.sh installs Debian's chromium)", flush=True)
        return
    origin = t.origin()
    cfg = config(t.workdir, concurrency=4, rate=100, burst=100, adaptive={"enabled": False},
                 hosts={REGISTRY_HOST: {"concurrency": 1, "reason": REGISTRY_REASON}})
    proxy = t.proxy(cfg)
    r = H.request(proxy, "http://%s:%d/one" % (TARGET, origin.port))
    H.check(r.error is None and r.status == 200, "%s: %r" % (TARGET, r))
    status, _, body = api(proxy, "PUT", "/api/hosts/%s/override" % API_HOST,
                          {"rate": 0.5, "reason": API_REASON, "expires_in": "1h"})
    H.check(status == 200, "the API override put beforehand: %s %s" % (status, body))

    with Browser(t.workdir) as b:
        b.navigate(proxy.admin_url + "/")
        b.wait_for("!!(document.querySelector('#hosts tr[data-host]') &&"
                   " document.querySelector('#overrides tr[data-host]'))", what="both tables drawn")

        # A
        overrides = rows(b, "overrides")
        H.log("overrides drawn: %s" % overrides)
        H.check(API_HOST in overrides and REGISTRY_HOST in overrides,
                "the overrides table should list %s and %s: %s" % (API_HOST, REGISTRY_HOST, sorted(overrides)))
        row = overrides[API_HOST]
        cells = row["cells"]
        H.check(cells[:4] == [API_HOST, "api", "-", "0.5"] and cells[5].startswith("in ") and cells[6] == API_REASON
                and cells[7] == "alice", "the %s row: api, rate 0.5, expiring, its reason, set by alice: %s"
                % (API_HOST, cells))
        H.check(row["elements"] == ["button"] * 3 and row["buttons"] == ["pause", "resume", "limit"],
                "the %s row: its reason must be text (no element but the buttons): %s" % (API_HOST, row))
        row = overrides[REGISTRY_HOST]
        H.check(row["cells"][1:3] == ["registry", "1"] and row["cells"][6] == REGISTRY_REASON
                and row["elements"] == [] and row["buttons"] == [],
                "the %s row: registry, concurrency 1, its reason as text, no buttons: %s" % (REGISTRY_HOST, row))
        H.check(b.js("document.title") == "politeproxy", "a reason ran as markup: the title is %r" % b.js("document.title"))

        # B
        cls, text = click(b, "hosts", TARGET, "pause")
        H.check(cls == "error" and "401" in text and "enter a token" in text, "pause without a token: %s %r" % (cls, text))
        fill(b, "token", "wrong-token-0123456789")
        cls, text = click(b, "hosts", TARGET, "pause")
        H.check(cls == "error" and "401" in text and "not accepted" in text, "pause with a wrong token: %s %r" % (cls, text))
        h = proxy.hosts()[TARGET]
        H.check(h["override_source"] is None and h["paused_seconds"] == 0, "a refused pause changed %s: %s" % (TARGET, h))
        listed = api_overrides(proxy)
        H.check(sorted(listed) == [API_HOST], "a refused pause changed /api/overrides: %s" % listed)

        fill(b, "token", TOKEN)
        stored = b.js("[sessionStorage.getItem('politeproxy.token'), localStorage.length, document.cookie]")
        H.check(stored == [TOKEN, 0, ""], "the token belongs in sessionStorage only: [session, local, cookie] = %s" % stored)

        # C
        fill(b, "reason", PAUSE_REASON)
        b.js("document.getElementById('pause-for').value = '10m'")
        cls, text = click(b, "hosts", TARGET, "pause")
        H.check(cls == "ok" and "paused until" in text, "pause with the token: %s %r" % (cls, text))
        h = proxy.hosts()[TARGET]
        H.check(h["override_source"] == "api" and 590 <= h["paused_seconds"] <= 600
                and h["override"]["reason"] == PAUSE_REASON.strip() and h["override"]["set_by"] == "alice",
                "after pause: /hosts %s should be paused ~600 s by alice's API override: %s" % (TARGET, h))
        b.wait_for("""(() => { const tr = [...document.querySelectorAll('#overrides tr')].find((r) => r.dataset.host === %s);
                       return tr && tr.cells[4].textContent.startsWith('in '); })()""" % json.dumps(TARGET),
                   what="%s paused in the overrides table" % TARGET)
        H.check(b.js("window.bad === undefined"), "a reason ran as a script")

        fill(b, "rate", "0")
        cls, text = click(b, "hosts", TARGET, "limit")
        H.check(cls == "error" and "400" in text and "(field: rate)" in text, "set limit rate 0: %s %r" % (cls, text))
        fill(b, "rate", "")
        fill(b, "concurrency", "1")
        cls, text = click(b, "hosts", TARGET, "limit")
        H.check(cls == "ok" and "concurrency 1" in text and "paused until" in text, "set limit 1: %s %r" % (cls, text))
        h = proxy.hosts()[TARGET]
        H.check(h["limit"] == 1 and h["override"]["concurrency"] == 1 and h["paused_seconds"] > 580,
                "after set limit 1: %s should be capped at 1 and still paused: %s" % (TARGET, h))
        b.wait_for("""(() => { const tr = [...document.querySelectorAll('#hosts tr')].find((r) => r.dataset.host === %s);
                       return tr && tr.className === 'paused' && tr.cells[4].textContent.split(' ')[0] === '1'; })()"""
                   % json.dumps(TARGET), what="%s drawn paused at limit 1" % TARGET)
        shot = os.path.join(os.path.dirname(os.path.abspath(t.binary)), "status-controls.png")
        png = b.screenshot(shot)
        H.check(png.startswith(b"\x89PNG") and len(png) > 5000, "the screenshot %s is not a PNG" % shot)
        print("screenshot: %s (%d bytes)" % (shot, len(png)), flush=True)

        cls, text = click(b, "overrides", TARGET, "resume")
        H.check(cls == "ok" and "deleted" in text, "resume: %s %r" % (cls, text))
        h = proxy.hosts()[TARGET]
        H.check(h["override_source"] is None and h["paused_seconds"] == 0 and h["limit"] == 4,
                "after resume: %s should be back to the defaults: %s" % (TARGET, h))
        H.check(sorted(api_overrides(proxy)) == [API_HOST], "after resume: %s" % api_overrides(proxy))
        # The proxy's output reaches proxy.lines through a reader thread: the resume's line
        # can arrive a moment after its answer.
        def logged_lines():
            return [line for line in proxy.lines if "override %s by alice" % TARGET in line]
        H.wait_until(lambda: len(logged_lines()) >= 3, 2.0 * H.SLOW)
        logged = logged_lines()
        H.check(len(logged) == 3, "pause, set limit and resume should each be logged once: %s" % logged)

        # D
        readonly = t.proxy(H.base_config(), name="readonly")
        r = H.request(readonly, "http://%s:%d/one" % (TARGET, origin.port))
        H.check(r.error is None and r.status == 200, "%s through the read-only proxy: %r" % (TARGET, r))
        b.navigate(readonly.admin_url + "/")
        cls, text = click(b, "hosts", TARGET, "pause")
        H.check(cls == "error" and "403" in text and "read-only" in text, "pause on a read-only API: %s %r" % (cls, text))
        H.check(readonly.hosts()[TARGET]["override_source"] is None, "a read-only API changed %s" % TARGET)

        problems = b.problems()
        H.check(not problems, "the page reported errors: %s" % problems)


if __name__ == "__main__":
    H.main(test, timeout=90)
