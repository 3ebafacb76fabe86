#!/usr/bin/python3
"""The admin listener's live status page (`/` and `/status.js`), rendered by headless
Chromium (Debian's `chromium`) against a running proxy under load:
  - busy.test: 6 slow requests at concurrency 2 (2 in flight, 4 waiting) is the first row,
    with those counts; plain.test (one request, done) is listed after it; the summary
    gives the totals over every host (from one page of GET /api/hosts);
  - paused.test, paused 30 s by a 429 with Retry-After, is drawn as paused, with its
    last change "throttled";
  - an override reason that looks like markup is shown as text, never as an element, in
    the hosts table and in the overrides table (odd.test, source "registry");
  - every host row has the operator's buttons; the page works read-only (no
    admin.token_file: test_status_controls.py drives the buttons);
  - plain.test, routed through a parent, names it ("via pool-a");
  - the page is served with a Content-Security-Policy that allows only its own script.
A screenshot of the page is written beside the binary (status-page.png), and its path
printed. Without chromium the test says so and is skipped (exit 0): scripts/install-deps.sh
installs it."""
import html
import os
import re
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

BUSY, PLAIN, PAUSED, ODD = "busy.test", "plain.test", "paused.test", "odd.test"
ODD_REASON = '<img src=x onerror="document.title=1"> documented limit'
CHROMIUM = shutil.which("chromium")


def page(t, *args):
    """The status page through headless Chromium (no proxy: the admin listener is loopback)."""
    return H.chromium(t.workdir, "--no-proxy-server", "--virtual-time-budget=4000", "--window-size=1280,720", *args)


def rows(dom, table="hosts"):
    """The table rows the script drew: [(host, class, [cell texts], inner HTML)]."""
    body = re.search(r'<tbody id="%s">(.*?)</tbody>' % table, dom, re.S)
    H.check(body is not None, "the page has no %s table body: %r" % (table, dom[:2000]))
    out = []
    for m in re.finditer(r'<tr([^>]*)>(.*?)</tr>', body.group(1), re.S):
        attrs, inner = m.group(1), m.group(2)
        host = re.search(r'data-host="([^"]*)"', attrs)
        cls = re.search(r'class="([^"]*)"', attrs)
        cells = [html.unescape(re.sub(r"<[^>]*>", "", c)) for c in re.findall(r"<td[^>]*>(.*?)</td>", inner, re.S)]
        out.append((html.unescape(host.group(1)) if host else None, cls.group(1) if cls else "", cells, inner))
    return out


def test(t):
    if not CHROMIUM:
        print("SKIP status page: no chromium on PATH (scripts/install-deps.sh installs Debian's chromium)", flush=True)
        return
    origin = t.origin()
    cfg = H.base_config(
        concurrency=2, rate=100, burst=100,
        backoff={"initial": "1s", "max": "60s", "jitter": 0},
        hosts={ODD: {"concurrency": 1, "reason": ODD_REASON}})
    # PLAIN goes through a parent (this origin, which answers absolute-form requests too).
    cfg["parents"] = {"pool-a": {"url": "http://127.0.0.1:%d" % origin.port}}
    cfg["routes"] = [{"match": [PLAIN], "via": ["pool-a"]}]
    proxy = t.proxy(cfg)

    status, headers, body = proxy.admin_get("/")
    hdr = dict((k.lower(), v) for k, v in headers)
    H.check(status == 200 and "text/html" in hdr.get("content-type", ""), "GET / answered %d %r" % (status, hdr))
    csp = hdr.get("content-security-policy", "")
    H.check("script-src 'self'" in csp and "default-src 'none'" in csp, "GET /: Content-Security-Policy %r" % csp)
    status, headers, script = proxy.admin_get("/status.js")
    # One page of the busiest hosts, never every host (a million would be ~500 MB a second).
    H.check(status == 200 and b"fetch('/api/hosts?sort=waiting&limit=' + shown" in script,
            "GET /status.js answered %d, or asks for more than a page of hosts" % status)
    hdr = dict((k.lower(), v) for k, v in headers)
    H.check("javascript" in hdr.get("content-type", "") and hdr.get("content-security-policy") == csp
            and hdr.get("x-content-type-options") == "nosniff", "GET /status.js headers %r" % hdr)

    for host in (PLAIN, ODD):
        r = H.request(proxy, "http://%s:%d/one" % (host, origin.port))
        H.check(r.error is None and r.status == 200, "%s: %r" % (host, r))
    r = H.request(proxy, "http://%s:%d/p?status=429&retry_after=30" % (PAUSED, origin.port))
    H.check(r.error is None and r.status == 429, "%s: %r" % (PAUSED, r))
    bg = H.Background(proxy, ["http://%s:%d/slow?delay=15&i=%d" % (BUSY, origin.port, i) for i in range(6)],
                      timeout=40)
    H.check(H.wait_until(lambda: (proxy.hosts().get(BUSY) or {}).get("waiting") == 4, 5.0),
            "6 requests to %s at concurrency 2 never had 4 waiting: %s" % (BUSY, proxy.hosts().get(BUSY)))

    dom = page(t, "--dump-dom", proxy.admin_url + "/")
    drawn = rows(dom)
    H.log("rows drawn: %s" % [(h, c, cells) for h, c, cells, _ in drawn])
    H.check(drawn and drawn[0][0] == BUSY,
            "the first row should be %s (4 waiting): %s" % (BUSY, [(h, cells) for h, _, cells, _ in drawn]))
    by_host = {h: (cls, cells, inner) for h, cls, cells, inner in drawn}
    for host in (BUSY, PLAIN, PAUSED, ODD):
        H.check(host in by_host, "the page shows no row for %s: %s" % (host, sorted(by_host)))
    cls, cells, _ = by_host[BUSY]
    H.check(cells[:3] == [BUSY, "4", "2"] and cls == "waiting",
            "%s row: waiting 4, in flight 2 expected, drawn %s (class %r)" % (BUSY, cells, cls))
    cls, cells, _ = by_host[PAUSED]
    H.check(cls == "paused" and cells[6].endswith(" s") and "throttled" in cells[7],
            "%s row: drawn as paused with last change 'throttled' expected: %s (class %r)" % (PAUSED, cells, cls))
    pause_left = float(cells[6].split()[0])
    H.check(15 <= pause_left <= 30.5, "%s row: pause %s, expected up to 30 s" % (PAUSED, cells[6]))
    cls, cells, _ = by_host[PLAIN]
    H.check(cells[9] == "http/1.1 via pool-a", "%s row: its protocol cell should name its parent: %s" % (PLAIN, cells))
    cls, cells, inner = by_host[ODD]
    H.check(cells[10] == ODD_REASON and "<img" not in inner,
            "%s row: the override reason must be text, not markup: %r" % (ODD, inner))
    H.check(cells[11] == "pauseresumeset limit" and 'data-action="pause"' in inner,
            "%s row: the operator's buttons expected in its last cell: %s" % (ODD, cells))
    overrides = {h: (cells, inner) for h, _, cells, inner in rows(dom, "overrides")}
    H.check(ODD in overrides, "the overrides table shows no row for %s: %s" % (ODD, sorted(overrides)))
    cells, inner = overrides[ODD]
    H.check(cells[1:3] == ["registry", "1"] and cells[6] == ODD_REASON and "<img" not in inner,
            "the overrides table's %s row: registry, concurrency 1 and its reason as text expected: %s %r"
            % (ODD, cells, inner))
    H.check("fleet store" in dom and ">off<" in dom, "the summary should say the fleet store is off")
    summary = re.search(r'<p id="summary">(.*?)</p>', dom, re.S)
    summary = re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]*>", "", summary.group(1)))) if summary else ""
    H.check("hosts 4 in flight 2 waiting 4 paused 1" in summary,
            "the summary (totals over every host) should read hosts 4, in flight 2, waiting 4, paused 1: %r"
            % summary)

    shot = os.path.join(os.path.dirname(os.path.abspath(t.binary)), "status-page.png")
    page(t, "--screenshot=" + shot, "--hide-scrollbars", proxy.admin_url + "/")
    with open(shot, "rb") as f:
        png = f.read()
    H.check(png.startswith(b"\x89PNG") and len(png) > 5000, "the screenshot %s is not a PNG of the page" % shot)
    print("screenshot: %s (%d bytes)" % (shot, len(png)), flush=True)
    # The slow requests are not waited for: stopping the proxy answers them.


if __name__ == "__main__":
    H.main(test, timeout=100)
