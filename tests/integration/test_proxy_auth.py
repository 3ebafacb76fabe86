#!/usr/bin/python3
"""Proxy authentication (security.users_file, htpasswd-style) and the open-proxy rule:
  - the loader accepts bcrypt ($2b$, as `htpasswd -B` writes) and {SHA} entries, refuses
    Apache MD5 ($apr1$) and plaintext naming the file and line, and refuses a config that
    listens beyond loopback for clients beyond loopback without a users file (--check-config
    exit 1); the same rule applies to --listen on the command line (no socket is bound);
  - no credentials / a wrong password / an unknown user: 407 with
    `Proxy-Authenticate: Basic realm="politeproxy"` and Proxy-Status; the connection stays
    open (keep-alive) and the same connection's next request with credentials gets 200;
  - the right bcrypt and {SHA} credentials: 200, and the origin never sees Proxy-Authorization;
  - hostile credentials (two Proxy-Authorization fields, even both right; not base64,
    over 4 KiB, no colon, a NUL in the password, an empty user) get 407 and a closed
    connection, and never reach the origin;
  - a new bcrypt credential is hashed off the I/O threads: with one worker, another
    client's request is served while it is checked;
  - CONNECT needs credentials too; an h2c stream without them, or with two fields, is
    answered 407 (two fields, as any wrong credentials, end the h2c connection);
  - rejected_total{reason="auth_required"} counts the 407s, and metrics.per_user counts
    each user's requests in user_requests_total{user}."""
import base64
import hashlib
import json
import os
import socket
import subprocess
import sys
import time
import warnings

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import crypt  # deprecated in 3.11 but present: libcrypt's bcrypt, as htpasswd -B writes it

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
from test_h2c import H2Client  # noqa: E402

HOST = "auth.test"


def basic(user, password):
    return "Basic " + base64.b64encode(("%s:%s" % (user, password)).encode()).decode()


def users_file(t, lines, name="users.htpasswd"):
    path = os.path.join(t.workdir, name)
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


def check_loader(t, good):
    cfg = H.base_config()
    cfg["security"]["users_file"] = good
    code, out, err, _, _ = t.check_config(cfg, "good")
    H.check(code == 0, "a bcrypt + {SHA} users file is refused: %s %s" % (out, err))
    for name, line, lines in (("apr1", 2, ["ok:{SHA}" + base64.b64encode(hashlib.sha1(b"x").digest()).decode(),
                                           "old:$apr1$abcdefgh$0123456789abcdefghijkl"]),
                              ("plain", 1, ["bob:secret"]),
                              ("twice", 2, ["a:{SHA}" + base64.b64encode(hashlib.sha1(b"x").digest()).decode()] * 2)):
        cfg["security"]["users_file"] = users_file(t, lines, name)
        code, out, err, _, _ = t.check_config(cfg, name)
        where = "%s:%d" % (cfg["security"]["users_file"], line)
        H.check(code == 1 and where in err, "users file %s: expected exit 1 naming %s, got %d: %s" % (name, where, code, err))
    # An open proxy: not loopback, every client, no users file.
    cfg = H.base_config()
    cfg["listen"] = "0.0.0.0:3128"
    cfg["security"]["allow_clients"] = ["0.0.0.0/0"]
    code, out, err, _, _ = t.check_config(cfg, "open")
    H.check(code == 1 and "open proxy" in err, "an open proxy config should be refused: %d %s" % (code, err))
    cfg["security"]["users_file"] = good
    code, out, err, _, _ = t.check_config(cfg, "open-with-users")
    H.check(code == 0, "the same with a users file should pass: %s" % err)
    # The rule after --listen: a loopback file, an open command line. Refused before binding.
    cfg = H.base_config()
    cfg["security"]["allow_clients"] = ["10.0.0.0/8", "127.0.0.0/8"]
    path = os.path.join(t.workdir, "flag.yaml")
    with open(path, "w") as f:
        f.write(H.dump_config(cfg))
    r = subprocess.run([t.binary, "--config", path, "--listen", "0.0.0.0:0", "--admin-listen", "127.0.0.1:0"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=20)
    H.check(r.returncode == 1 and "open proxy" in r.stderr, "--listen 0.0.0.0 with wide clients and no users: %d %s"
            % (r.returncode, r.stderr))


def test(t):
    bcrypt_hash = crypt.crypt("s3cret", crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=1 << 5))
    sha_hash = "{SHA}" + base64.b64encode(hashlib.sha1(b"legacy-pw").digest()).decode()
    good = users_file(t, ["# crawlers", "crawler:" + bcrypt_hash, "", "legacy:" + sha_hash])
    check_loader(t, good)

    origin = t.origin()
    cfg = H.base_config(tls_port=origin.port)
    cfg["security"]["users_file"] = good
    cfg["metrics"] = {"per_user": True}
    proxy = t.proxy(cfg)
    url = "http://%s:%d/who" % (HOST, origin.port)

    refused = 0
    for what, headers in (("no credentials", {}), ("a wrong password", {"Proxy-Authorization": basic("crawler", "nope")}),
                          ("an unknown user", {"Proxy-Authorization": basic("mallory", "s3cret")}),
                          ("not Basic", {"Proxy-Authorization": "Bearer abc"})):
        r = H.request(proxy, url, headers=headers)
        refused += 1
        H.check(r.status == 407, "%s: expected 407, got %r" % (what, r))
        H.check(r.header("Proxy-Authenticate") == 'Basic realm="politeproxy"',
                "%s: Proxy-Authenticate %r" % (what, r.header("Proxy-Authenticate")))
        H.check("politeproxy; error=http_request_denied" in (r.header("Proxy-Status") or ""),
                "%s: Proxy-Status %r" % (what, r.header("Proxy-Status")))

    for user, password in (("crawler", "s3cret"), ("legacy", "legacy-pw")):
        for _ in range(3):
            r = H.request(proxy, url, headers={"Proxy-Authorization": basic(user, password)})
            H.check(r.status == 200, "%s with the right password: %r" % (user, r))
        seen = [k.lower() for k, _ in r.json()["headers"]]
        H.check("proxy-authorization" not in seen, "the origin saw Proxy-Authorization: %s" % seen)

    # curl's way: a 407, then credentials on the same kept-alive connection.
    c = H.RawClient(proxy.port)
    c.send(H.raw_get(proxy.port, HOST, origin.port, "/first", connection="keep-alive"))
    first = c.read_response()
    refused += 1
    H.check(first.status == 407, "the first request without credentials: %r" % first)
    c.send(H.raw_get(proxy.port, HOST, origin.port, "/second", connection="close",
                     extra_headers="Proxy-Authorization: %s\r\n" % basic("crawler", "s3cret")))
    second = c.read_response()
    H.check(second.status == 200, "credentials on the same connection after a 407: %r" % second)
    c.close()
    # Wrong credentials close the connection: each guess costs a new one.
    c = H.RawClient(proxy.port)
    c.send(H.raw_get(proxy.port, HOST, origin.port, "/guess", connection="keep-alive",
                     extra_headers="Proxy-Authorization: %s\r\n" % basic("crawler", "guess")))
    guess = c.read_response()
    refused += 1
    H.check(guess.status == 407 and (guess.header("Connection") or "").lower() == "close",
            "wrong credentials should get 407 and close: %r" % guess)
    c.close()

    # Hostile credentials: each is refused (407, connection closed) without reaching the
    # origin, and the proxy serves the right ones afterwards.
    right = basic("crawler", "s3cret")
    b64 = lambda raw: "Basic " + base64.b64encode(raw).decode()  # noqa: E731
    for what, fields in (("two fields, the right one first", [right, basic("crawler", "nope")]),
                         ("two fields, both right", [right, right]),
                         ("not base64", ["Basic !!!!"]), ("base64 without its padding", [right.rstrip("=")]),
                         ("over 4 KiB", [b64(b"crawler:" + b"x" * 4096)]), ("no colon", [b64(b"crawler")]),
                         ("a NUL in the password", [b64(b"crawler:s3cret\0")]), ("Basic alone", ["Basic"]),
                         ("an empty user", [b64(b":s3cret")])):
        c = H.RawClient(proxy.port)
        extra = "".join("Proxy-Authorization: %s\r\n" % f for f in fields)
        c.send(H.raw_get(proxy.port, HOST, origin.port, "/hostile", connection="keep-alive", extra_headers=extra))
        r = c.read_response()
        refused += 1
        H.check(r.status == 407 and (r.header("Connection") or "").lower() == "close",
                "%s: expected 407 and close, got %r" % (what, r))
        if len(fields) > 1:
            H.check("more than one Proxy-Authorization" in (r.header("Proxy-Status") or ""),
                    "%s: Proxy-Status %r" % (what, r.header("Proxy-Status")))
        c.close()
    H.check(not any(q["target"] == "/hostile" for q in origin.host(HOST)["requests"]),
            "a request with hostile credentials reached the origin")
    r = H.request(proxy, url, headers={"Proxy-Authorization": right})
    H.check(r.status == 200, "the right credentials after the hostile ones: %r" % r)

    # CONNECT: refused without credentials, a tunnel with them.
    s = socket.create_connection(("127.0.0.1", proxy.port), timeout=10)
    target = "%s:%d" % (HOST, origin.port)
    s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (target, target)).encode())
    head = s.recv(4096).decode(errors="replace")
    refused += 1
    H.check(head.startswith("HTTP/1.1 407"), "CONNECT without credentials: %r" % head[:200])
    s.close()
    s = socket.create_connection(("127.0.0.1", proxy.port), timeout=10)
    s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: %s\r\n\r\n"
               % (target, target, basic("crawler", "s3cret"))).encode())
    head = s.recv(4096).decode(errors="replace")
    H.check(head.startswith("HTTP/1.1 200"), "CONNECT with credentials: %r" % head[:200])
    s.close()

    # h2c: a stream without credentials, then one with.
    h = H2Client(proxy.port)
    bare = h.request(target, "/h2")
    authed = h.request(target, "/h2", headers=[("proxy-authorization", basic("crawler", "s3cret"))])
    H.check(h.pump(h.done([bare, authed])), "the h2c streams were not answered")
    # Two fields are wrong credentials: 407, and the connection ends (test_auth_guessing.py).
    wrong = H2Client(proxy.port)
    twice = wrong.request(target, "/h2", headers=[("proxy-authorization", basic("crawler", "nope")),
                                                  ("proxy-authorization", basic("crawler", "s3cret"))])
    H.check(wrong.pump(wrong.done([twice])), "the h2c stream with two fields was not answered")
    wrong.close()
    refused += 2
    H.check(wrong.responses[twice]["status"] == 407, "an h2c stream with two proxy-authorization fields: %s"
            % wrong.responses[twice])
    H.check(h.responses[bare]["status"] == 407 and
            h.responses[bare]["headers"].get("proxy-authenticate") == 'Basic realm="politeproxy"',
            "an h2c stream without credentials: %s" % h.responses[bare])
    H.check(h.responses[authed]["status"] == 200, "an h2c stream with credentials: %s" % h.responses[authed])
    seen = [k.lower() for k, _ in json.loads(h.responses[authed]["body"])["headers"]]
    H.check("proxy-authorization" not in seen, "the origin saw Proxy-Authorization from an h2c stream: %s" % seen)
    h.close()

    m = proxy.metrics()
    H.check(H.mget(m, "politeproxy_rejected_total", reason="auth_required") == refused,
            "rejected_total{reason=auth_required} is %s, expected %d"
            % (H.mget(m, "politeproxy_rejected_total", reason="auth_required"), refused))
    crawler = H.mget(m, "politeproxy_user_requests_total", user="crawler")
    H.check(crawler == 3 + 1 + 1 + 1 + 1, "user_requests_total{user=crawler} is %s, expected 7" % crawler)
    H.check(H.mget(m, "politeproxy_user_requests_total", user="legacy") == 3, "user_requests_total{user=legacy}")

    check_hashing_off_thread(t, origin)


def check_hashing_off_thread(t, origin):
    """A new bcrypt credential is hashed off the I/O threads: with one worker, a request
    whose costly password (bcrypt cost 14, about a second) is being checked does not hold
    up another client's request."""
    slow = crypt.crypt("slow-pw", crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=1 << 14))
    legacy = "{SHA}" + base64.b64encode(hashlib.sha1(b"legacy-pw").digest()).decode()
    cfg = H.base_config(tls_port=origin.port)
    cfg["workers"] = 1
    cfg["security"]["users_file"] = users_file(t, ["slow:" + slow, "legacy:" + legacy], "slow.htpasswd")
    proxy = t.proxy(cfg, name="one-worker")
    url = "http://%s:%d/off-thread" % (HOST, origin.port)
    guess = H.Background(proxy, [url], headers={"Proxy-Authorization": basic("slow", "guess")})
    time.sleep(0.3)  # the guess is being hashed now
    quick = H.request(proxy, url, headers={"Proxy-Authorization": basic("legacy", "legacy-pw")})
    guessed = guess.wait()[0]
    H.check(quick.status == 200, "the quick request: %r" % quick)
    H.check(guessed.status == 407, "the slow guess: %r" % guessed)
    H.check(quick.t_end < guessed.t_end - 0.3,
            "the quick request ended %.2f s after the slow check began, %.2f s before it ended: it waited for "
            "the hashing" % (quick.t_end - guessed.t_start, guessed.t_end - quick.t_end))


if __name__ == "__main__":
    H.main(test, timeout=60)
