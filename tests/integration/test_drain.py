#!/usr/bin/python3
"""SIGTERM drains: with two 1 s requests in flight at the origin (concurrency 2) and a
third parked behind them, SIGTERM makes the proxy stop accepting and answer /readyz 503,
answer the parked request 503 at once (Retry-After, Proxy-Status
error=proxy_internal_response; it never reaches the origin), let both in-flight requests
complete with 200, and exit 0 within a few seconds."""
import os
import signal
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

HOST = "drain.test"


def test(t):
    origin = t.origin()
    cfg = H.base_config(concurrency=2, rate=100, burst=100)
    cfg["drain_timeout"] = "5s"
    proxy = t.proxy(cfg)
    status, _, body = proxy.admin_get("/readyz")
    H.check(status == 200, "/readyz answered %d before draining: %r" % (status, body))

    # an idle keep-alive client connection: SIGTERM closes it
    idle = H.RawClient(proxy.port, timeout=5)
    idle.send(H.raw_get(proxy.port, "idle.test", origin.port, "/idle",
                        connection="keep-alive"))
    r = idle.read_response(5)
    H.check(r is not None and r.status == 200, "keep-alive request: %r" % r)

    base = "http://%s:%d" % (HOST, origin.port)
    inflight = H.Background(proxy, [base + "/slow?delay=1&i=%d" % i for i in range(2)],
                            timeout=20)
    H.check(H.wait_until(lambda: origin.host(HOST)["in_flight"] == 2, 2.0),
            "the two 1 s requests never were in flight at the origin together: %s"
            % H.brief(origin.host(HOST)))
    parked = H.Background(proxy, [base + "/parked"], timeout=20)
    H.check(H.wait_until(lambda: H.mget(proxy.metrics(), "politeproxy_host_waiting",
                                        host=HOST) == 1, 1.0),
            "the third request never showed as parked (host_waiting 1)")

    t_sig = time.monotonic()
    os.kill(proxy.pid, signal.SIGTERM)
    H.log("SIGTERM sent")

    res = parked.wait(5)[0]
    took = res.t_end - t_sig
    H.log("parked request: %r, %.2fs after SIGTERM; headers %s" % (res, took, res.headers))
    H.check(res.error is None and res.status == 503,
            "the parked request should get 503 on SIGTERM, got %r" % res)
    H.check(took < 0.8, "the parked request's 503 came %.2fs after SIGTERM; it should be"
            " answered at once, not after the drain" % took)
    ra = res.header("Retry-After")
    H.check(ra is not None and (ra.strip().isdigit() or "GMT" in ra),
            "the drain 503 needs a Retry-After (delta-seconds or HTTP date), got %r" % ra)
    ps = res.header("Proxy-Status") or ""
    H.check("politeproxy" in ps and "error=proxy_internal_response" in ps,
            "the drain 503 should carry 'Proxy-Status: politeproxy;"
            " error=proxy_internal_response', got %r" % ps)

    # idle keep-alive connections are closed
    H.check(idle.read_response(1.5) is None and idle.eof,
            "an idle keep-alive client connection stayed open after SIGTERM")
    idle.close()

    # still draining (the 1 s requests run): not ready, and not accepting
    if proxy.alive() and time.monotonic() - t_sig < 0.7:
        try:
            status, _, body = proxy.admin_get("/readyz", timeout=2)
            H.log("/readyz while draining: %d %r" % (status, body))
            H.check(status == 503, "/readyz answered %d while draining, expected 503"
                    % status)
        except OSError as e:
            H.check(False, "the admin listener was gone while requests were still in"
                    " flight: %s" % e)
        refused = False
        try:
            s = socket.create_connection(("127.0.0.1", proxy.port), timeout=1)
            s.close()
        except OSError:
            refused = True
        H.check(refused, "the proxy port still accepted a connection after SIGTERM")

    results = inflight.wait(10)
    H.log("in-flight requests: %s" % results)
    for r in results:
        H.check(r.error is None and r.status == 200,
                "a request in flight at SIGTERM should complete with 200, got %r" % r)
        H.check(len(r.body) > 0, "a request in flight at SIGTERM got an empty body: %r" % r)

    try:
        rc = proxy.proc.wait(max(0.1, t_sig + 4.0 - time.monotonic()))
    except Exception:  # noqa: BLE001 - subprocess.TimeoutExpired
        H.check(False, "the proxy still runs %.1fs after SIGTERM (drain_timeout 5s, the"
                " in-flight requests took 1 s)" % (time.monotonic() - t_sig))
    H.log("proxy exited with %s, %.2fs after SIGTERM" % (rc, time.monotonic() - t_sig))
    H.check(rc == 0, "the proxy exited with %s after SIGTERM, expected 0" % rc)
    H.check(not [x for x in origin.host(HOST)["requests"] if x["target"] == "/parked"],
            "the parked request reached the origin after SIGTERM")
    # the answer must not blame the queue: the request waited milliseconds
    H.check("max_wait" not in ps and b"max_wait" not in res.body,
            "the drain 503 says the request waited longer than queue.max_wait (it was"
            " parked %.2fs; the proxy is shutting down): Proxy-Status %r, body %r"
            % (res.elapsed, ps, res.body))


if __name__ == "__main__":
    H.main(test, timeout=30)
