"""Headless Chromium driven over the DevTools protocol (CDP) on --remote-debugging-pipe:
Chromium reads commands from its fd 3 and writes answers and events to its fd 4, each a
JSON text ended by a NUL byte. No websocket, no port: the standard library is enough.

    with Browser(workdir, window=(1280, 900)) as b:
        b.navigate(url)
        b.wait_for("document.querySelector('#hosts tr') !== null")
        b.js("document.title")          # Runtime.evaluate, by value, promises awaited

Events are kept (b.events): b.problems() lists uncaught exceptions and console errors
(a Content-Security-Policy violation is one; a failed load is not). Chromium runs in a session of its own,
killed whole by close(), and dies with the test process (PR_SET_PDEATHSIG)."""
import base64
import fcntl
import json
import os
import select
import signal
import subprocess
import time

from harness_checks import SLOW, TestFailure, check
from harness_proxy import _pdeathsig

CHILD_IN, CHILD_OUT = 3, 4  # the fds Chromium's pipe transport uses
HIGH_FD = 10                # our ends are moved above them so the child's dup2 never collides


def _high(fd):
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, HIGH_FD)
    os.close(fd)
    return moved


class Browser:
    def __init__(self, workdir, *args, window=(1280, 900), timeout=20):
        self.timeout = timeout * SLOW
        self.events = []
        self._next_id = 0
        self._buf = b""
        to_child_r, self._to_child = (_high(fd) for fd in os.pipe())
        self._from_child, from_child_w = (_high(fd) for fd in os.pipe())

        def child_setup():
            _pdeathsig()
            os.dup2(to_child_r, CHILD_IN)   # dup2 clears close-on-exec on the copies
            os.dup2(from_child_w, CHILD_OUT)

        cmd = ["chromium", "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
               "--disable-extensions", "--no-proxy-server", "--remote-debugging-pipe",
               "--window-size=%d,%d" % window, "--user-data-dir=" + os.path.join(workdir, "chromium-cdp"),
               *args, "about:blank"]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, start_new_session=True, close_fds=False,
                                     preexec_fn=child_setup)
        os.close(to_child_r)
        os.close(from_child_w)
        try:
            page = [t for t in self.send("Target.getTargets")["targetInfos"] if t["type"] == "page"]
            check(page, "chromium has no page target")
            self.session = self.send("Target.attachToTarget", targetId=page[0]["targetId"], flatten=True)["sessionId"]
            for domain in ("Page", "Runtime", "Log"):
                self.send(domain + ".enable", session=True)
        except BaseException:
            self.close()
            raise

    # -- the protocol ---------------------------------------------------------------
    def send(self, method, session=False, **params):
        """One command; its result (a TestFailure for a protocol error or no answer in time).
        session=True sends it to the attached page rather than to the browser."""
        self._next_id += 1
        msg = {"id": self._next_id, "method": method, "params": params}
        if session:
            msg["sessionId"] = self.session
        os.write(self._to_child, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            for m in self._read(deadline):
                if m.get("id") == self._next_id:
                    check("error" not in m, "CDP %s: %s" % (method, m.get("error")))
                    return m.get("result", {})
                if "method" in m:
                    self.events.append(m)

    def _read(self, deadline):
        left = deadline - time.monotonic()
        check(left > 0, "chromium did not answer within %.0fs" % self.timeout)
        ready, _, _ = select.select([self._from_child], [], [], left)
        if not ready:
            return []
        data = os.read(self._from_child, 1 << 20)
        check(data, "chromium closed its DevTools pipe (exit %s)" % self.proc.poll())
        self._buf += data
        *whole, self._buf = self._buf.split(b"\0")
        return [json.loads(m) for m in whole]

    # -- the page -------------------------------------------------------------------
    def navigate(self, url):
        self.send("Page.navigate", session=True, url=url)

    def js(self, expression):
        """The value of a JavaScript expression in the page (a promise is awaited)."""
        r = self.send("Runtime.evaluate", session=True, expression=expression, returnByValue=True, awaitPromise=True)
        check("exceptionDetails" not in r, "JavaScript %r threw: %s" % (expression[:200], r.get("exceptionDetails")))
        return r["result"].get("value")

    def wait_for(self, expression, timeout=10, what=None):
        """Polls the expression until it is truthy; returns its value."""
        deadline = time.monotonic() + timeout * SLOW
        while True:
            value = self.js(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise TestFailure("the page never showed %s within %ds (%r)" % (what or expression, timeout, value))
            time.sleep(0.05)

    def screenshot(self, path):
        data = base64.b64decode(self.send("Page.captureScreenshot", session=True, format="png")["data"])
        with open(path, "wb") as f:
            f.write(data)
        return data

    def problems(self):
        """Uncaught exceptions and console errors the page reported so far, as text; not
        failed loads (source "network": an API's 401 the page expects is one)."""
        out = []
        for e in self.events:
            if e["method"] == "Runtime.exceptionThrown":
                details = e["params"]["exceptionDetails"]
                out.append("exception: %s" % details.get("exception", {}).get("description", details.get("text")))
            elif (e["method"] == "Log.entryAdded" and e["params"]["entry"]["level"] == "error"
                  and e["params"]["entry"]["source"] != "network"):
                out.append("%s: %s" % (e["params"]["entry"]["source"], e["params"]["entry"]["text"]))
            elif e["method"] == "Runtime.consoleAPICalled" and e["params"]["type"] == "error":
                out.append("console.error: %s" % [a.get("value") for a in e["params"]["args"]])
        return out

    def close(self):
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait(10)
        for name in ("_to_child", "_from_child"):  # once each: a closed number may be reused
            fd = getattr(self, name)
            if fd is not None:
                os.close(fd)
                setattr(self, name, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
