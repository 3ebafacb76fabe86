#!/usr/bin/python3
"""Per-client caps and client identities (clients.*, issue 28).

A  clients.max_waiting 50 (identify_by header:X-Crawler), one host at concurrency 1, the
   origin answering after 1 s: crawler A sends 80 requests at once: 1 goes, 50 park
   (client_waiting{client="A"} 50), the other 29 get 503 at once with Retry-After and a
   Proxy-Status whose details name clients.max_waiting; meanwhile crawler B's request is
   admitted (it parks, then gets 200); client_requests_total{client="A",
   outcome="rejected"} counts the 29.
B  queue.max_waiting of a host counts per client share: a host with queue.max_waiting 10,
   crawler A sends 15 at once (1 goes, 10 park, 4 get 503 with Retry-After); crawler B's
   first request is still admitted (not 503) and answered 200.
C  clients.max_in_flight 2: client "greedy" sends 8 requests to each of two hosts at
   concurrency 4 (300 ms each): the origin never has more than 2 of greedy's requests at
   once across both hosts (and has 2), and greedy's 16 are done in about 16 x 0.3 / 2 s
   (a client held at its cap on one host goes on when its slot on the other comes back);
   client "other" sends 4 to the first host meanwhile: they go beside greedy's (2 or
   more at once) and are done long before greedy's; nothing is refused.
D  identities: identify_by user (two users in security.users_file): client="alice" and
   "bob"; identify_by address (sockets bound to 127.0.0.2 and 127.0.0.3): client=
   "127.0.0.2" and "127.0.0.3"; identify_by header: the header's values, "anonymous"
   without it, and X-Crawler never reaches the origin; with security.allow_clients
   [127.0.0.1/32] a client from 127.0.0.2 sending X-Crawler: intruder gets 403 and no
   client series ever names "intruder". While requests are parked, GET /api/hosts/{key}
   lists {"client", "waiting", "weight"} per waiting client with clients.weights'
   weights, and client_waiting / client_in_flight agree.
E  metrics.max_client_series 2 with 4 clients: the client_* metrics name at most 2
   clients plus client="_other", and client_requests_total loses no request.
"""
import base64
import hashlib
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
from control_api import api  # noqa: E402
from harness_bounds import overlap_peak  # noqa: E402
from test_fair_share import AsyncClients, client_labels, echoed_fields, leaked  # noqa: E402

REQUESTS = "politeproxy_client_requests_total"


def header_config(**clients):
    cfg = H.base_config(concurrency=1, rate=1000, burst=10, adaptive={"enabled": False})
    cfg["clients"] = dict({"identify_by": "header:X-Crawler", "share": "fair"}, **clients)
    return cfg


def check_503(r, what, details=None):
    ra = r.header("Retry-After")
    ps = r.header("Proxy-Status") or ""
    H.check(r.status == 503 and ra is not None and (ra.strip().isdigit() or "GMT" in ra),
            "%s: want 503 with Retry-After, got %s %s" % (what, r.status, r.headers))
    H.check("politeproxy" in ps and "error=" in ps and (details is None or details in ps),
            "%s: Proxy-Status %r should name %s" % (what, ps, details or "an error"))


def requests_by_client(m, outcome=None):
    out = {}
    for (n, ls), v in m.items():
        d = dict(ls)
        if n == REQUESTS and (outcome is None or d.get("outcome") == outcome):
            out[d.get("client")] = out.get(d.get("client"), 0) + v
    return out


def done_results(futs):
    return [f.result() for f in futs if f.done()]


def basic(user, password):
    return "Basic " + base64.b64encode(("%s:%s" % (user, password)).encode()).decode()


def sha_entry(user, password):
    return "%s:{SHA}%s" % (user, base64.b64encode(hashlib.sha1(password.encode()).digest()).decode())


# -- A: clients.max_waiting ---------------------------------------------------------------
def part_a(t, origin):
    host = "capa.test"
    proxy = t.proxy(header_config(max_waiting=50), name="max-waiting")
    clients = AsyncClients(proxy.port)
    base = "http://%s:%d" % (host, origin.port)
    try:
        a = [clients.get("%s/a?delay=1&i=%d" % (base, i), "A", {"X-Crawler": "A"}, timeout=120) for i in range(80)]
        H.wait_until(lambda: len(done_results(a)) >= 29, 5, 0.05)
        time.sleep(0.3)  # any further refusal would be as quick
        refused = [r for r in done_results(a) if r.status == 503]
        m = proxy.metrics()
        waiting = H.mget(m, "politeproxy_client_waiting", None, client="A")
        H.log("A: 80 requests of A at once: %s answered at once (%d 503), client_waiting{A} %s, host waiting %s"
              % (H.summarize(done_results(a)), len(refused), waiting,
                 H.msum(m, "politeproxy_host_waiting", host=host)))
        H.check(waiting == 50, "client_waiting{client=\"A\"} is %s, want 50 (clients.max_waiting)" % waiting)
        H.check(len(refused) == 29 and len(done_results(a)) == 29,
                "A's 80 requests at once, 1 at the origin and 50 parked: %d refused (want 29), answered %s"
                % (len(refused), H.summarize(done_results(a))))
        for r in refused:
            check_503(r, "A's request over clients.max_waiting", "clients.max_waiting")
        # B is another client: admitted, parked, answered.
        t_b = time.monotonic()
        b = clients.get("%s/b?delay=1" % base, "B", {"X-Crawler": "B"}, timeout=30)
        H.check(H.wait_until(lambda: H.mget(proxy.metrics(), "politeproxy_client_waiting", 0, client="B") == 1
                             or b.done(), 5), "B's request never showed in client_waiting{client=\"B\"}")
        rb = b.result(30)
        H.log("A: B's request while A is at clients.max_waiting: %s after %.2f s (%s)"
              % (rb.status, rb.t_end - t_b, rb.header("Proxy-Status")))
        H.check(rb.status == 200, "B's request while A was at its clients.max_waiting: %s %s" % (rb, rb.headers))
        m = H.metrics_when(proxy, REQUESTS, 29, client="A", outcome="rejected")
        H.check(H.mget(m, REQUESTS, 0, client="A", outcome="rejected") == 29,
                "client_requests_total{client=\"A\",outcome=\"rejected\"}: %s, A got 29 503s"
                % H.mget(m, REQUESTS, None, client="A", outcome="rejected"))
        H.check(H.mget(m, REQUESTS, 0, client="B", outcome="rejected") == 0, "B counted as rejected")
        m = H.metrics_when(proxy, REQUESTS, 1, client="B", outcome="ok")
        H.check(H.mget(m, REQUESTS, 0, client="B", outcome="ok") == 1,
                "client_requests_total{client=\"B\",outcome=\"ok\"}: %s" % H.mget(m, REQUESTS, None, client="B", outcome="ok"))
        clients.close_group("A")
        gone = H.wait_until(lambda: H.msum(proxy.metrics(), "politeproxy_client_waiting") == 0, 5, 0.1)
        H.check(gone, "client_waiting after A closed its connections: %s"
                % H.mseries(proxy.metrics(), "politeproxy_client_waiting"))
    finally:
        clients.stop()
        proxy.stop()


# -- B: queue.max_waiting per client share --------------------------------------------------
def part_b(t, origin):
    host = "capb.test"
    cfg = header_config()
    cfg["hosts"] = {host: {"queue": {"max_waiting": 10}}}
    proxy = t.proxy(cfg, name="host-share")
    clients = AsyncClients(proxy.port)
    base = "http://%s:%d" % (host, origin.port)
    try:
        a = [clients.get("%s/a?delay=1&i=%d" % (base, i), "A", {"X-Crawler": "A"}, timeout=60) for i in range(15)]
        H.wait_until(lambda: len(done_results(a)) >= 4, 5, 0.05)
        time.sleep(0.3)
        refused = [r for r in done_results(a) if r.status == 503]
        H.log("B: 15 requests of A against queue.max_waiting 10: %s answered at once; host waiting %s"
              % (H.summarize(done_results(a)), H.msum(proxy.metrics(), "politeproxy_host_waiting", host=host)))
        H.check(len(refused) == 4 and len(done_results(a)) == 4,
                "A's 15 requests at once, 1 at the origin and queue.max_waiting 10: %d refused (want 4), answered %s"
                % (len(refused), H.summarize(done_results(a))))
        for r in refused:
            check_503(r, "A's request over the host's queue.max_waiting")
        rb = clients.get("%s/b?delay=1" % base, "B", {"X-Crawler": "B"}, timeout=30).result(30)
        H.log("B: B's first request to the full queue: %s %s" % (rb.status, rb.header("Proxy-Status")))
        H.check(rb.status == 200, "B's first request to a host whose queue A filled: %s %s (%s)"
                % (rb.status, rb.header("Proxy-Status"), rb.error))
    finally:
        clients.stop()
        proxy.stop()


# -- C: clients.max_in_flight ---------------------------------------------------------------
def part_c(t, origin):
    hosts = ("capc1.test", "capc2.test")
    cfg = header_config(max_in_flight=2)
    cfg["defaults"]["concurrency"] = 4
    proxy = t.proxy(cfg, name="max-in-flight")
    clients = AsyncClients(proxy.port)
    try:
        t0 = time.monotonic()
        greedy = [clients.get("http://%s:%d/g?c=greedy&delay=0.3&i=%d" % (h, origin.port, i), "greedy",
                              {"X-Crawler": "greedy"}, timeout=60) for h in hosts for i in range(8)]
        H.wait_until(lambda: clients.sent.get("greedy", 0) == 16, 5)
        time.sleep(0.1)
        t_other = time.monotonic()
        other = [clients.get("http://%s:%d/o?c=other&delay=0.3&i=%d" % (hosts[0], origin.port, i), "other",
                             {"X-Crawler": "other"}, timeout=60) for i in range(4)]
        # 16 x 0.3 s at 2 at a time is 2.4 s: give it 10 s, then say where it is stuck
        H.wait_until(lambda: all(f.done() for f in greedy + other), 10, 0.1)
        stuck = [f for f in greedy + other if not f.done()]
        if stuck:
            m = proxy.metrics()
            H.check(False, "%d of greedy's and other's requests still unanswered after 10 s (%d of greedy's);"
                    " origin counts %s; client_in_flight %s, client_waiting %s; /hosts clients %s"
                    % (len(stuck), sum(1 for f in greedy if not f.done()),
                       {h: origin.host(h)["count"] for h in hosts},
                       H.mseries(m, "politeproxy_client_in_flight"), H.mseries(m, "politeproxy_client_waiting"),
                       {k: v.get("clients") for k, v in proxy.hosts().items()}))
        other_r = [f.result(1) for f in other]
        greedy_r = [f.result(1) for f in greedy]
    finally:
        clients.stop()
        proxy.stop()
    recs = [r for h in hosts for r in origin.host(h)["requests"]]
    g_recs = [r for r in recs if "c=greedy" in r["target"]]
    o_recs = [r for r in recs if "c=other" in r["target"]]
    g_took = max(r.t_end for r in greedy_r) - t0
    o_took = max(r.t_end for r in other_r) - t_other
    H.log("C: greedy %s in %.2f s (origin peak %d of %d seen); other %s in %.2f s (origin peak %d)"
          % (H.summarize(greedy_r), g_took, overlap_peak(g_recs), len(g_recs), H.summarize(other_r), o_took,
             overlap_peak(o_recs)))
    H.check(all(r.status == 200 for r in greedy_r + other_r),
            "clients.max_in_flight refused or failed requests: greedy %s, other %s"
            % (H.summarize(greedy_r), H.summarize(other_r)))
    H.check(len(g_recs) == 16 and overlap_peak(g_recs) == 2,
            "greedy (clients.max_in_flight 2) had %d requests at the origin at once across two hosts (%d seen)"
            % (overlap_peak(g_recs), len(g_recs)))
    H.check(g_took < 16 * 0.3 / 2 + 1.5,
            "greedy's 16 requests at 2 at a time took %.2f s (ideal 2.4 s): a client at its cap stalls" % g_took)
    H.check(len(o_recs) == 4 and overlap_peak(o_recs) >= 2,
            "other's 4 requests beside greedy's: %d at the origin, %d at once" % (len(o_recs), overlap_peak(o_recs)))
    H.check(o_took < 1.2 and max(r.t_end for r in other_r) < max(r.t_end for r in greedy_r),
            "other's 4 requests took %.2f s (greedy's %.2f s): held behind a client at its cap" % (o_took, g_took))


# -- D: identities ------------------------------------------------------------------------------
def part_d_user(t, origin):
    path = os.path.join(t.workdir, "users.htpasswd")
    with open(path, "w") as f:
        f.write("%s\n%s\n" % (sha_entry("alice", "alice-pw"), sha_entry("bob", "bob-pw")))
    cfg = header_config()
    cfg["clients"]["identify_by"] = "user"
    cfg["security"]["users_file"] = path
    proxy = t.proxy(cfg, name="by-user")
    url = "http://idu.test:%d/u" % origin.port
    sent = {"alice": 2, "bob": 3}
    results = []
    for user, n in sent.items():
        for i in range(n):
            results.append(H.request(proxy, "%s?i=%d" % (url, i),
                                     headers={"Proxy-Authorization": basic(user, user + "-pw")}))
    H.check(all(r.status == 200 for r in results), "identify_by user: %s" % H.summarize(results))
    m = H.metrics_when(proxy, REQUESTS, 5)
    got = requests_by_client(m)
    H.log("D: identify_by user: client_requests_total by client %s" % got)
    H.check(got == sent, "identify_by user: client_requests_total by client %s, sent %s" % (got, sent))
    proxy.stop()


def part_d_address(t, origin):
    cfg = header_config()
    cfg["clients"]["identify_by"] = "address"
    proxy = t.proxy(cfg, name="by-address")
    clients = AsyncClients(proxy.port)
    sent = {"127.0.0.2": 2, "127.0.0.3": 1}
    try:
        futs = [clients.get("http://ida.test:%d/a?i=%d" % (origin.port, i), src, source=src, timeout=20)
                for src, n in sent.items() for i in range(n)]
        results = [f.result(30) for f in futs]
    finally:
        clients.stop()
    H.check(all(r.status == 200 for r in results), "identify_by address: %s" % [(r.status, r.error) for r in results])
    m = H.metrics_when(proxy, REQUESTS, 3)
    got = requests_by_client(m)
    H.log("D: identify_by address: client_requests_total by client %s" % got)
    H.check(got == sent, "identify_by address: client_requests_total by client %s, sent %s" % (got, sent))
    proxy.stop()


def part_d_header(t, origin):
    cfg = header_config(weights={"alpha": 3})
    cfg["security"]["allow_clients"] = ["127.0.0.1/32"]
    proxy = t.proxy(cfg, name="by-header")
    clients = AsyncClients(proxy.port)
    url = "http://idh.test:%d/h" % origin.port
    try:
        sent = {"alpha": 2, "beta": 1, "anonymous": 1}
        results = []
        for name, n in sent.items():
            for i in range(n):
                headers = {} if name == "anonymous" else {"X-Crawler": name}
                results.append(H.request(proxy, "%s?c=%s&i=%d" % (url, name, i), headers=headers))
        H.check(all(r.status == 200 for r in results), "identify_by header: %s" % H.summarize(results))
        H.check(all(echoed_fields(r) is not None for r in results), "the origin's echo is missing")
        H.check(not leaked(results), "the origin saw X-Crawler: %s" % [r.body[:300] for r in leaked(results)])
        m = H.metrics_when(proxy, REQUESTS, 4)
        got = requests_by_client(m)
        H.log("D: identify_by header: client_requests_total by client %s" % got)
        H.check(got == sent, "identify_by header: client_requests_total by client %s, sent %s" % (got, sent))

        # A client outside allow_clients: refused, its header names nobody.
        intruder = clients.get("%s?c=intruder" % url, "intruder", {"X-Crawler": "intruder"}, source="127.0.0.2",
                               timeout=10).result(20)
        H.check(intruder.status == 403, "a client from 127.0.0.2 outside allow_clients [127.0.0.1/32]: %s %s"
                % (intruder.status, intruder.error))

        # Parked requests per client in /api/hosts/{key}, client_waiting and client_in_flight.
        park = "idpark.test"
        pbase = "http://%s:%d" % (park, origin.port)
        first = clients.get("%s/p?c=gamma&delay=2" % pbase, "gamma", {"X-Crawler": "gamma"}, timeout=30)
        H.check(H.wait_until(lambda: origin.host(park)["in_flight"] == 1, 5), "gamma's request never reached the origin")
        parked = [clients.get("%s/p?c=%s&delay=0.1&i=%d" % (pbase, name, i), name, {"X-Crawler": name}, timeout=30)
                  for name, n in (("alpha", 3), ("beta", 2)) for i in range(n)]
        view = {}

        def listed():
            status, _, body = api(proxy, "GET", "/api/hosts/%s" % park, token=None)
            view["status"], view["body"] = status, body
            if status != 200 or not isinstance(body, dict):
                return False
            return sum(c.get("waiting", 0) for c in body.get("clients") or []) == 5
        H.wait_until(listed, 5, 0.05)
        m = proxy.metrics()
        body = view.get("body")
        H.log("D: /api/hosts/%s while alpha 3 and beta 2 are parked: %s %s" % (
            park, view.get("status"), body.get("clients") if isinstance(body, dict) else body))
        H.check(view.get("status") == 200 and isinstance(body, dict) and isinstance(body.get("clients"), list),
                "GET /api/hosts/%s: %s %s" % (park, view.get("status"), body))
        by_name = {c.get("client"): c for c in body["clients"]}
        H.check(by_name.get("alpha", {}).get("waiting") == 3 and by_name["alpha"].get("weight") == 3,
                "/api/hosts/%s clients: alpha should wait 3 with weight 3: %s" % (park, body["clients"]))
        H.check(by_name.get("beta", {}).get("waiting") == 2 and by_name["beta"].get("weight") == 1,
                "/api/hosts/%s clients: beta should wait 2 with weight 1: %s" % (park, body["clients"]))
        H.check(by_name.get("gamma", {}).get("waiting", 0) == 0,
                "/api/hosts/%s clients: gamma is in flight, not waiting: %s" % (park, body["clients"]))
        waiting = {n: H.mget(m, "politeproxy_client_waiting", None, client=n) for n in ("alpha", "beta")}
        in_flight = H.mget(m, "politeproxy_client_in_flight", None, client="gamma")
        H.check(waiting == {"alpha": 3, "beta": 2} and in_flight == 1,
                "client_waiting %s (want alpha 3, beta 2), client_in_flight{client=\"gamma\"} %s (want 1)"
                % (waiting, in_flight))
        rest = [first.result(30)] + [f.result(30) for f in parked]
        H.check(all(r.status == 200 for r in rest), "the parked requests: %s" % H.summarize(rest))
        H.check(not leaked(rest), "the origin saw X-Crawler")
        m = proxy.metrics()
        H.check("intruder" not in client_labels(m),
                "a client outside allow_clients named a client series: %s" % sorted(client_labels(m)))
        H.check("intruder" not in proxy.metrics_text(), "\"intruder\" appears in /metrics")
    finally:
        clients.stop()
        proxy.stop()


# -- E: metrics.max_client_series -------------------------------------------------------------
def part_e(t, origin):
    cfg = header_config()
    cfg["defaults"]["concurrency"] = 4
    cfg["metrics"] = {"max_client_series": 2}
    proxy = t.proxy(cfg, name="client-series")
    sent = {"k1": 4, "k2": 3, "k3": 2, "k4": 1}
    results = []
    for name, n in sent.items():
        for i in range(n):
            results.append(H.request(proxy, "http://cap-series.test:%d/s?c=%s&i=%d" % (origin.port, name, i),
                                     headers={"X-Crawler": name}))
    H.check(all(r.status == 200 for r in results), "max_client_series: %s" % H.summarize(results))
    m = H.metrics_when(proxy, REQUESTS, 10)
    got = requests_by_client(m)
    labels = client_labels(m)
    named = labels - {"_other"}
    H.log("E: metrics.max_client_series 2, 4 clients: client labels %s; requests by client %s" % (sorted(labels), got))
    H.check(len(named) <= 2 and "_other" in labels,
            "max_client_series 2 with 4 clients: client labels %s (want at most 2 names and _other)" % sorted(labels))
    H.check(named <= set(sent), "client labels that are no client: %s" % sorted(named - set(sent)))
    H.check(sum(got.values()) == 10, "client_requests_total sums to %s over %s, 10 requests were sent"
            % (sum(got.values()), got))
    proxy.stop()


def test(t):
    origin = t.origin()
    part_a(t, origin)
    part_b(t, origin)
    part_c(t, origin)
    part_d_user(t, origin)
    part_d_address(t, origin)
    part_d_header(t, origin)
    part_e(t, origin)


if __name__ == "__main__":
    H.main(test, timeout=55)
