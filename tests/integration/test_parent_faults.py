#!/usr/bin/python3
"""Parent proxies that misbehave, each a scripted parent on loopback that records what it
was sent:
- a parent that answers 407 to the proxy's credentials, to a request and to a CONNECT:
  502 error=proxy_configuration_error naming it (next-hop), logged once;
- one that accepts and never answers: 504 at timeouts.response_headers, the
  destination's timeout (a parent waits for a slow origin), never the parent's failure;
  one that closes at once: 502, its own failure; after fail_after it is down, and a
  route [it, direct] goes direct at once, while a route with only it is answered 502
  next-hop with Retry-After without connecting;
- a parent cannot carry a request the proxy would refuse: a name whose address the deny
  list refuses (localhost, loopback denied) is answered 403 through a parent route, and
  the parent (itself on loopback: trusted configuration) never hears of it;
- a parent's 503 to a CONNECT and its 502 to a request are its word about the
  destination (its limit collapses, the parent stays up); its 403 to a CONNECT counts
  against nobody;
- hostile answers, as strict as an origin's (README's hostile-input table): a response
  with conflicting Content-Lengths, a header over limits.response_header_bytes: 502 each;
  a 200 to CONNECT followed by bytes before the proxy spoke: 502 where the proxy speaks
  TLS next (interception), relayed to the client in a spliced tunnel (a server-first
  protocol's banner); the proxy still serves;
- what the parent was sent: the absolute-form target and the parent's Proxy-Authorization."""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

BEHAVIOURS = {
    "auth": b"HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm=\"p\"\r\nContent-Length: 0\r\n\r\n",
    "lengths": b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
    "huge": b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * 70000 + b"\r\nContent-Length: 0\r\n\r\n",
    "garbage": b"HTTP/1.1 200 Connection established\r\n\r\nNOT TLS AT ALL",
    "forbid": b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n",
    "unreachable": b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n",
    "gateway": b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 3\r\n\r\nbad",
    "silent": None,
    "close": b"",
}


class ScriptedParent(H.RawServer):
    """Reads a request head, records it, then answers `behaviour`'s bytes (None: never, b"": close)."""

    def __init__(self, behaviour):
        self.behaviour = behaviour
        self.heads = []
        H.RawServer.__init__(self, "parent-" + behaviour)

    def _serve(self, s, idx):
        got = H.recv_head(s, b"")
        if got is None:
            return s.close()
        with self.lock:
            self.heads.append(got[0].decode("latin-1"))
        answer = BEHAVIOURS[self.behaviour]
        if answer is None:
            return  # holds the connection open, silent
        if answer:
            s.sendall(answer)
        s.close()


def status_of(r):
    return r.header("Proxy-Status") or ""


def test(t):
    origin = t.origin()
    parents = {name: ScriptedParent(name) for name in BEHAVIOURS}
    for p in parents.values():
        t.stores.append(p)
    cfg = H.base_config(concurrency=4, rate=1000, burst=1000, timeouts={"response_headers": "1s", "connect": "1s"},
                        backoff={"initial": "100ms", "max": "200ms"})
    cfg["parents"] = {name: {"url": "http://pp:parent-secret@127.0.0.1:%d" % p.port, "retry_after": "30s",
                             "fail_after": 2}
                      for name, p in parents.items()}
    cfg["routes"] = [{"match": ["%s.test" % name], "via": [name]} for name in BEHAVIOURS]
    cfg["routes"] += [{"match": ["fallback.test"], "via": ["close", "direct"]},
                      ]
    cfg["security"]["connect_ports"].append(origin.port)
    proxy = t.proxy(cfg)

    # 407: a configuration error, never the client's to answer; logged once.
    for i in range(3):
        r = H.request(proxy, "http://auth.test:%d/a?i=%d" % (origin.port, i))
        H.check(r.status == 502 and "error=proxy_configuration_error" in status_of(r) and 'next-hop="auth"' in status_of(r),
                "a parent's 407: %s %r" % (r.status, status_of(r)))
        H.check(r.header("Proxy-Authenticate") is None, "the parent's Proxy-Authenticate reached the client")
    s, head = H.connect_tunnel_raw(proxy, "auth.test", origin.port)
    s.close()
    H.check(head.startswith(b"HTTP/1.1 502") and b"proxy_configuration_error" in head, "CONNECT, parent 407: %r" % head)
    H.check(proxy.tail(200).count("refused this proxy's credentials") == 1,
            "the 407 should be logged once:\n" + proxy.tail(200))
    sent = parents["auth"].heads[0].split("\r\n")
    H.check(sent[0] == "GET http://auth.test:%d/a?i=0 HTTP/1.1" % origin.port, "the parent was sent %r" % sent[0])
    H.check("Proxy-Authorization: Basic cHA6cGFyZW50LXNlY3JldA==" in sent, "no parent credentials in %r" % sent)
    H.check(any(h.startswith("CONNECT auth.test:%d HTTP/1.1" % origin.port) for h in parents["auth"].heads),
            "no CONNECT reached the parent: %s" % parents["auth"].heads)
    H.log("407 from a parent: 502 proxy_configuration_error, logged once; the parent got %r" % sent[0])

    # Hostile answers: 502, as from an origin.
    for name in ("lengths", "huge"):
        r = H.request(proxy, "http://%s.test:%d/h" % (name, origin.port))
        H.check(r.status == 502 and 'next-hop="%s"' % name in status_of(r), "%s: %s %r" % (name, r.status, status_of(r)))
    # Bytes behind a parent's 200 to CONNECT: in a spliced tunnel they are the origin's first
    # (a server-first protocol's banner) and reach the client; where the proxy speaks TLS
    # next (interception) nothing may come first: 502.
    s, head = H.connect_tunnel_raw(proxy, "garbage.test", origin.port)
    rest = H.recv_to_close(s)
    s.close()
    H.check(head.startswith(b"HTTP/1.1 200") and b'next-hop="garbage"' in head and rest.startswith(b"NOT TLS AT ALL"),
            "a tunnel through a parent that spoke first: %r %r" % (head, rest))
    ca_cert, ca_key = t.gen_ca()
    icfg = dict(cfg, tls={"mode": "intercept", "ca_cert": ca_cert, "ca_key": ca_key})
    intercepting = t.proxy(icfg, name="intercept")
    r = subprocess.run(["curl", "-sS", "--max-time", "10", "--cacert", ca_cert, "-x",
                        "http://127.0.0.1:%d" % intercepting.port, "-D", "-", "-o", "/dev/null",
                        "https://garbage.test:%d/g" % origin.port], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=20)
    H.check(("HTTP/2 502" in r.stdout or "HTTP/1.1 502" in r.stdout) and "http_protocol_error" in r.stdout
            and 'next-hop="garbage"' in r.stdout, "intercepted, a parent's 200 to CONNECT with bytes behind: %r" % r.stdout)
    H.log("hostile parent answers: 502 each; bytes behind a 200 to CONNECT relayed in a tunnel, 502 when intercepting")

    # A parent's word about the destination counts against the destination, its own refusal
    # against nobody; neither marks the parent down (fail_after 2, each asked twice).
    for i in range(2):
        s, head = H.connect_tunnel_raw(proxy, "unreachable.test", origin.port)
        s.close()
        H.check(head.startswith(b"HTTP/1.1 502") and b"destination_unavailable" in head, "CONNECT, parent 503: %r" % head)
        s, head = H.connect_tunnel_raw(proxy, "forbid.test", origin.port)
        s.close()
        H.check(head.startswith(b"HTTP/1.1 502") and b"destination_unavailable" in head, "CONNECT, parent 403: %r" % head)
        r = H.request(proxy, "http://gateway.test:%d/g?i=%d" % (origin.port, i))
        H.check(r.status == 502 and r.body == b"bad", "a parent's own 502 to a request passes through: %s %r" % (r.status, r.body))
    hosts, m = proxy.hosts(), proxy.metrics()
    for name in ("unreachable", "forbid", "gateway"):
        H.check(H.mget(m, "politeproxy_parent_up", parent=name) == 1, "%s's parent was marked down" % name)
    for name in ("unreachable", "gateway"):
        H.check(hosts["%s.test" % name]["last_change"] and hosts["%s.test" % name]["last_change"]["reason"] != "grow"
                and hosts["%s.test" % name]["limit"] == 1,
                "%s.test: the parent's word about it should collapse its limit: %s" % (name, hosts["%s.test" % name]))
    H.check(hosts["forbid.test"]["limit"] == 4, "a parent's own 403 said nothing of forbid.test: %s" % hosts["forbid.test"])
    H.log("a parent's 503 to CONNECT and 502 to a request collapse the destination; its 403 counts against nobody")

    # A silent parent waits, most often, for a slow origin: the destination's timeout, never
    # the parent's failure (fail_after 2, asked twice); a closing parent fails itself, and is down.
    for i in range(2):
        r = H.request(proxy, "http://silent.test:%d/s?i=%d" % (origin.port, i))
        H.check(r.status == 504 and 'next-hop="silent"' in status_of(r), "a silent parent: %s %r" % (r.status, status_of(r)))
    H.check(H.mget(proxy.metrics(), "politeproxy_parent_up", parent="silent") == 1,
            "silence (a slow destination, as far as anyone can tell) marked the parent down")
    r = H.request(proxy, "http://close.test:%d/c" % origin.port)
    H.check(r.status == 502 and 'next-hop="close"' in status_of(r), "a closing parent: %s %r" % (r.status, status_of(r)))
    r = H.request(proxy, "http://fallback.test:%d/f1" % origin.port)  # its second failure: down now
    H.check(r.status == 502, "the closing parent's second failure: %s" % r.status)
    m = H.metrics_when(proxy, "politeproxy_parent_up", 0, parent="close")
    H.check(H.mget(m, "politeproxy_parent_up", parent="close") == 0, "the closing parent should be down")
    r = H.request(proxy, "http://fallback.test:%d/f2" % origin.port)
    H.check(r.status == 200 and "next-hop" not in status_of(r), "[close, direct] with close down: %s %r" % (r.status, status_of(r)))
    before = parents["close"].accepted
    r = H.request(proxy, "http://close.test:%d/c2" % origin.port)
    H.check(r.status == 502 and 'next-hop="close"' in status_of(r) and r.header("Retry-After"),
            "a route whose parents are all down: %s %r %r" % (r.status, status_of(r), r.header("Retry-After")))
    H.check(parents["close"].accepted == before, "a down parent was connected to")
    H.log("silent parent 504 and up, closing parent 502, then down: direct takes its fallback route, its own route 502 "
          "with Retry-After %s" % r.header("Retry-After"))

    # The deny list, through a parent: the name is resolved and every address judged (the
    # default deny list: loopback is denied here; the parent, on loopback, is trusted config).
    strict = H.base_config(allow_loopback=False)
    strict["parents"] = {"silent": cfg["parents"]["silent"]}
    strict["routes"] = [{"match": ["localhost"], "via": ["silent"]}]
    guarded = t.proxy(strict, name="deny")
    heard = parents["silent"].accepted
    r = H.request(guarded, "http://localhost:%d/deny" % origin.port)
    H.check(r.status == 403 and "destination_ip_prohibited" in status_of(r), "localhost (loopback denied) through a parent: %s %r"
            % (r.status, status_of(r)))
    H.check(parents["silent"].accepted == heard, "the parent heard of a denied destination")

    # Still serving, nothing held.
    r = H.request(proxy, "http://direct.test:%d/still" % origin.port)
    H.check(r.status == 200, "after the faults: %s" % r.status)
    hosts = proxy.hosts_settled()
    H.check(all(h["in_flight"] == 0 for h in hosts.values()), "a slot is still held: %s" % hosts)
    m = H.metrics_when(proxy, "politeproxy_parent_connections", 0)
    H.check(all(v == 0 for v in H.mseries(m, "politeproxy_parent_connections").values()),
            "a parent turn is still held: %s" % H.mseries(m, "politeproxy_parent_connections"))


if __name__ == "__main__":
    H.main(test, timeout=60)
