"""The control API (/api/...) as a client of the admin listener: api() for one call,
the token file, a config with admin: set."""
import http.client
import json
import os

import harness as H

TOKEN = "alice-token-0123456789abcdef"


def token_file(workdir, lines=("alice:" + TOKEN,)):
    path = os.path.join(workdir, "tokens")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    os.chmod(path, 0o600)
    return path


def api(proxy, method, path, body=None, token=TOKEN, timeout=10):
    """(status, headers dict lower-cased, JSON or text) of one call to the admin listener."""
    conn = http.client.HTTPConnection("127.0.0.1", proxy.admin_port, timeout=timeout)
    try:
        headers = {}
        if token is not None:
            headers["Authorization"] = "Bearer " + token
        data = None
        if body is not None:
            data = body if isinstance(body, (str, bytes)) else json.dumps(body)
            headers["Content-Type"] = "application/json"
        conn.request(method, path, body=data, headers=headers)
        r = conn.getresponse()
        raw = r.read().decode("utf-8", "replace")
        hdrs = {k.lower(): v for k, v in r.getheaders()}
        try:
            return r.status, hdrs, json.loads(raw)
        except ValueError:
            return r.status, hdrs, raw
    finally:
        conn.close()


def config(workdir, state_file=True, **defaults):
    cfg = H.base_config(**defaults)
    cfg["admin"] = {"token_file": token_file(workdir)}
    if state_file:
        cfg["admin"]["state_file"] = os.path.join(workdir, "overrides.json")
    return cfg
