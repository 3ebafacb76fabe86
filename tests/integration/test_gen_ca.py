#!/usr/bin/python3
"""politeproxy --gen-ca DIR: writes ca.pem and ca.key (mode 0600), a CA (CA:TRUE,
pathlen 0, ECDSA P-256) named for politeproxy and this host, loadable as a trust anchor
by Python's ssl and by openssl; a second run refuses to overwrite either file and exits
non-zero; a directory that does not exist is an error, not a crash."""
import os
import socket
import ssl
import stat
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402


def gen_ca(t, d):
    return subprocess.run([t.binary, "--gen-ca", d], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=20)


def test(t):
    d = os.path.join(t.workdir, "ca")
    os.mkdir(d)
    r = gen_ca(t, d)
    H.check(r.returncode == 0, "--gen-ca exited %d: %s" % (r.returncode, r.stderr))
    cert, key = os.path.join(d, "ca.pem"), os.path.join(d, "ca.key")
    mode = stat.S_IMODE(os.stat(key).st_mode)
    H.check(mode == 0o600, "ca.key has mode %o, not 600" % mode)

    text = subprocess.run(["openssl", "x509", "-in", cert, "-noout", "-subject", "-text"],
                          stdout=subprocess.PIPE, text=True, check=True).stdout
    H.check("CA:TRUE, pathlen:0" in text, "not CA:TRUE with pathlen 0:\n" + text)
    H.check("politeproxy CA on %s" % socket.gethostname() in text, "subject does not name politeproxy and the host:\n"
            + text.splitlines()[0])
    H.check("prime256v1" in text or "P-256" in text, "the key is not P-256:\n" + text)
    ctx = ssl.create_default_context(cafile=cert)  # loads as a trust anchor
    H.check(any(c.get("subject") for c in ctx.get_ca_certs()), "ssl did not load the CA")
    H.log("wrote a CA: %s" % text.splitlines()[0])

    before = open(cert, "rb").read(), open(key, "rb").read()
    r = gen_ca(t, d)
    H.check(r.returncode != 0 and "exists" in r.stderr, "a second --gen-ca did not refuse: exit %d, %r"
            % (r.returncode, r.stderr))
    H.check((open(cert, "rb").read(), open(key, "rb").read()) == before, "a second --gen-ca changed the files")
    H.log("second run refused: %s" % r.stderr.strip())

    r = gen_ca(t, os.path.join(t.workdir, "missing", "dir"))
    H.check(r.returncode == 1 and "No such file" in r.stderr, "a missing directory: exit %d, %r"
            % (r.returncode, r.stderr))
    H.log("missing directory: %s" % r.stderr.strip())


if __name__ == "__main__":
    H.main(test, timeout=30)
