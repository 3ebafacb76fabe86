#!/usr/bin/python3
"""tls.mode intercept, the origin side: the proxy sends nothing to an origin whose
certificate it cannot verify. A test CA (made here, trusted through tls.upstream_ca_file)
signs the certificates of four TLS origins:
- good.test: valid, names good.test -> 200 (the control: the test can tell a proxy that
  refuses everything from one that verifies);
- expired.test: names expired.test, expired yesterday;
- wrong.test: valid, but names only other.test;
- untrusted.test: self-signed, by no CA the proxy trusts.
Each of the last three -> 502, Proxy-Status error=tls_certificate_error with the verify
reason in details, and that origin's application saw no request. Afterwards in_flight and
waiting are 0."""
import datetime
import os
import sys

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402


def _name(cn):
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _write(directory, stem, cert, key):
    cert_path, key_path = os.path.join(directory, stem + ".pem"), os.path.join(directory, stem + ".key")
    with open(cert_path, "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))
    with open(key_path, "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()))
    return cert_path, key_path


def _certificate(subject, key, issuer, issuer_key, not_before, not_after, names=(), ca=False):
    b = (x509.CertificateBuilder().subject_name(_name(subject)).issuer_name(_name(issuer))
         .public_key(key.public_key()).serial_number(x509.random_serial_number())
         .not_valid_before(not_before).not_valid_after(not_after)
         .add_extension(x509.BasicConstraints(ca=ca, path_length=0 if ca else None), critical=True))
    if names:
        b = b.add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in names]), critical=False)
    return b.sign(issuer_key, hashes.SHA256())


def make_certificates(directory):
    """{stem: (certfile, keyfile)} for the test CA and the four origins."""
    now = datetime.datetime.now(datetime.timezone.utc)
    day = datetime.timedelta(days=1)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _certificate("origin test CA", ca_key, "origin test CA", ca_key, now - day, now + 2 * day, ca=True)
    out = {"ca": _write(directory, "origin-ca", ca, ca_key)}

    def leaf(stem, names, not_before, not_after, issuer="origin test CA", issuer_key=ca_key):
        key = ec.generate_private_key(ec.SECP256R1())
        signer = key if issuer_key is None else issuer_key
        out[stem] = _write(directory, stem, _certificate(names[0], key, issuer, signer, not_before, not_after,
                                                        names), key)

    leaf("good", ["good.test"], now - day, now + day)
    leaf("expired", ["expired.test"], now - 3 * day, now - day)
    leaf("wrong", ["other.test"], now - day, now + day)
    leaf("untrusted", ["untrusted.test"], now - day, now + day, issuer="untrusted.test", issuer_key=None)
    return out


def test(t):
    certs = make_certificates(t.workdir)
    proxy_ca, proxy_key = t.gen_ca()
    origins = {}
    for stem in ("good", "expired", "wrong", "untrusted"):
        o = H.Origin(tls=True, certfile=certs[stem][0], keyfile=certs[stem][1]).start()
        t.origins.append(o)
        origins[stem] = o

    cfg = H.base_config(concurrency=2, rate=1000, burst=1000)
    cfg["security"]["connect_ports"] = [o.port for o in origins.values()]
    cfg["tls"] = {"mode": "intercept", "ca_cert": proxy_ca, "ca_key": proxy_key,
                  "upstream_ca_file": certs["ca"][0]}
    proxy = t.proxy(cfg)

    expected_reason = {"expired": "expired", "wrong": "hostname mismatch", "untrusted": "self"}  # self-signed, self signed
    for stem, o in origins.items():
        host = stem + ".test"
        s = H.https_session(proxy, proxy_ca)
        resp = s.get("https://%s:%d/%s" % (host, o.port, stem), timeout=10)
        s.close()
        status = resp.headers.get("Proxy-Status", "")
        H.log("%s: %d %s" % (host, resp.status_code, status))
        if stem == "good":
            H.check(resp.status_code == 200 and o.host(host)["count"] == 1,
                    "the valid origin: %d, seen %d" % (resp.status_code, o.host(host)["count"]))
            continue
        H.check(resp.status_code == 502 and "error=tls_certificate_error" in status,
                "%s: %d %r" % (host, resp.status_code, status))
        H.check(expected_reason[stem] in status, "%s: the verify reason is not in details: %r" % (host, status))
        H.check(o.host(host)["count"] == 0, "%s: the origin's application saw a request" % host)

    H.check(H.wait_until(lambda: all(v == 0 for v in (
        H.msum(proxy.metrics(), "politeproxy_host_in_flight"), H.msum(proxy.metrics(), "politeproxy_host_waiting"))),
        5), "in_flight/waiting did not return to 0")


if __name__ == "__main__":
    H.main(test, timeout=60)
