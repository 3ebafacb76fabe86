"""Other programs the tests drive: promtool (checks a /metrics text) and headless
Chromium (the status page and dashboard tests)."""
import os
import signal
import subprocess

from harness_checks import SLOW, TestFailure, check, log


def promtool_check(text):
    """`promtool check metrics` on a /metrics text: fails the test with promtool's words."""
    r = subprocess.run(["promtool", "check", "metrics"], input=text.encode(), stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=20)
    out = r.stdout.decode("utf-8", "replace")
    log("promtool exit %d %s" % (r.returncode, out.strip()))
    check(r.returncode == 0, "promtool check metrics failed:\n%s" % out)


def chromium(workdir, *args, timeout=60, env=None):
    """Runs headless Chromium (Debian's `chromium`) with `args`, in a process group of its
    own that is killed whole on timeout; its profile lives in `workdir`. Returns stdout."""
    cmd = ["chromium", "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
           "--user-data-dir=" + os.path.join(workdir, "chromium"), *args]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True, env=env)
    try:
        out, err = p.communicate(timeout=timeout * SLOW)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        raise TestFailure("chromium did not finish within %ds: %s" % (timeout, " ".join(cmd)))
    check(p.returncode == 0, "chromium exited %d: %s" % (p.returncode, err.decode(errors="replace")[-2000:]))
    return out.decode(errors="replace")
