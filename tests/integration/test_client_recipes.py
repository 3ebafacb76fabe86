#!/usr/bin/python3
"""Every client recipe of README.md ("Pointing crawlers at it"), run as shown, through one
proxy in tls.mode intercept: plain HTTP, and HTTPS intercepted (each client trusting the
proxy's CA the way the recipe says). Clients: curl, wget, Python requests, httpx, aiohttp,
Scrapy, Go's net/http (Debian's golang-go) and headless Chromium (--proxy-server). For
each, both requests reach the origin (its own count per host) and answer 200 with the
origin's echo of the path; the Python clients also see Proxy-Status queue-wait. A client
that is not installed is reported and skipped (scripts/install-deps.sh installs them all)."""
import asyncio
import json
import os
import re
import shutil
import ssl
import subprocess
import sys
import textwrap

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402


def clean_env(t):
    env = {k: v for k, v in os.environ.items() if k.lower() not in ("http_proxy", "https_proxy", "all_proxy", "no_proxy")}
    env["HOME"] = t.workdir
    return env


def run(t, cmd, timeout=60, env=None):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout, env=env or clean_env(t))
    H.check(r.returncode == 0, "%s exited %d: %s" % (cmd[0], r.returncode, r.stderr.decode(errors="replace")[-1500:]))
    return r.stdout.decode(errors="replace")


def echo_of(text):
    """The origin's JSON echo inside whatever the client printed (Chromium wraps it in HTML)."""
    m = re.search(r"\{.*\}", text, re.S)
    H.check(m is not None, "no JSON echo in %r" % text[:300])
    import html
    return json.loads(html.unescape(m.group(0)))


# --- the recipes, as README shows them ------------------------------------------------
def curl(t, proxy, url, ca):
    return 200, run(t, ["curl", "-sS", "--fail", "-x", proxy, "--cacert", ca, url]), ""


def wget(t, proxy, url, ca):
    return 200, run(t, ["wget", "-qO-", "-e", "use_proxy=yes", "-e", "http_proxy=" + proxy, "-e", "https_proxy=" + proxy,
                        "--ca-certificate=" + ca, url]), ""


def requests_(t, proxy, url, ca):
    import requests
    r = requests.get(url, proxies={"http": proxy, "https": proxy}, verify=ca, timeout=30)
    return r.status_code, r.text, r.headers.get("Proxy-Status", "")


def httpx_(t, proxy, url, ca):
    import httpx
    with httpx.Client(proxies=proxy, verify=ca, trust_env=False, timeout=30) as c:
        r = c.get(url)
        return r.status_code, r.text, r.headers.get("proxy-status", "")


def aiohttp_(t, proxy, url, ca):
    import aiohttp

    async def go():
        async with aiohttp.ClientSession() as s:
            async with s.get(url, proxy=proxy, ssl=ssl.create_default_context(cafile=ca)) as r:
                return r.status, await r.text(), r.headers.get("Proxy-Status", "")
    return asyncio.run(go())


def scrapy_(t, proxy, url, ca):
    # Scrapy does not verify origin certificates by default: the CA is not needed.
    script = textwrap.dedent("""
        import json, sys, scrapy
        from scrapy.crawler import CrawlerProcess
        proxy, out, url = sys.argv[1:4]
        got = []
        class Recipe(scrapy.Spider):
            name = "recipe"
            def start_requests(self):
                yield scrapy.Request(url, meta={"proxy": proxy})
            def parse(self, response):
                got.append((response.status, response.text, response.headers.get("Proxy-Status", b"").decode()))
        p = CrawlerProcess({"CONCURRENT_REQUESTS_PER_DOMAIN": 64, "AUTOTHROTTLE_ENABLED": False,
                            "LOG_LEVEL": "ERROR", "TELNETCONSOLE_ENABLED": False, "ROBOTSTXT_OBEY": False})
        p.crawl(Recipe)
        p.start()
        json.dump(got, open(out, "w"))
        """)
    out = os.path.join(t.workdir, "scrapy.json")
    run(t, ["/usr/bin/python3", "-c", script, proxy, out, url])
    with open(out) as f:
        got = json.load(f)
    H.check(len(got) == 1, "scrapy got %d responses" % len(got))
    return tuple(got[0])


GO = textwrap.dedent("""
    package main

    import (
        "crypto/tls"
        "crypto/x509"
        "fmt"
        "io"
        "net/http"
        "net/url"
        "os"
    )

    func main() {
        proxy, _ := url.Parse(os.Args[1])
        pem, _ := os.ReadFile(os.Args[2])
        roots := x509.NewCertPool()
        roots.AppendCertsFromPEM(pem)
        client := &http.Client{Transport: &http.Transport{
            Proxy:           http.ProxyURL(proxy),
            TLSClientConfig: &tls.Config{RootCAs: roots},
        }}
        resp, err := client.Get(os.Args[3])
        if err != nil {
            fmt.Fprintln(os.Stderr, err)
            os.Exit(1)
        }
        defer resp.Body.Close()
        body, _ := io.ReadAll(resp.Body)
        fmt.Printf("%d %s\\n%s", resp.StatusCode, resp.Header.Get("Proxy-Status"), body)
    }
    """)


def go_(t, proxy, url, ca):
    src = os.path.join(t.workdir, "recipe.go")
    with open(src, "w") as f:
        f.write(GO)
    env = clean_env(t)
    env.update(GOCACHE=os.path.join(t.workdir, "gocache"), GOPATH=os.path.join(t.workdir, "gopath"),
               GOFLAGS="-mod=mod", GO111MODULE="off", GOTOOLCHAIN="local")
    binary = os.path.join(t.workdir, "recipe")
    if not os.path.exists(binary):
        run(t, ["go", "build", "-o", binary, src], timeout=180, env=env)
    out = run(t, [binary, proxy, ca, url], env=env)
    first, _, body = out.partition("\n")
    status, _, proxy_status = first.partition(" ")
    return int(status), body, proxy_status


def chromium(t, proxy, url, ca):
    # Chromium trusts the CA from the user's NSS database (certutil: libnss3-tools).
    nssdb = os.path.join(t.workdir, ".pki", "nssdb")
    if not os.path.isdir(nssdb):
        os.makedirs(nssdb)
        run(t, ["certutil", "-d", "sql:" + nssdb, "-N", "--empty-password"])
        run(t, ["certutil", "-d", "sql:" + nssdb, "-A", "-t", "C,,", "-n", "politeproxy", "-i", ca])
    out = H.chromium(t.workdir, "--proxy-server=" + proxy, "--dump-dom", url, timeout=90, env=clean_env(t))
    return 200, out, ""


# (name, the program it needs on PATH or None for a Python library, the recipe)
RECIPES = [("curl", "curl", curl), ("wget", "wget", wget), ("requests", None, requests_), ("httpx", None, httpx_),
           ("aiohttp", None, aiohttp_), ("scrapy", None, scrapy_), ("go", "go", go_),
           ("chromium", "chromium", chromium)]  # and certutil (libnss3-tools) for its trust store


def test(t):
    ca_cert, ca_key = t.gen_ca()
    names = ["%s.test" % name for name, _, _ in RECIPES]
    t._cert = H.make_cert(t.workdir, names[0], extra_names=tuple(names[1:]))
    plain = t.origin()
    secure = t.origin(tls=True)
    origin_cert, _ = t.cert()
    cfg = H.base_config(tls_port=secure.port)
    cfg["tls"] = {"mode": "intercept", "ca_cert": ca_cert, "ca_key": ca_key, "upstream_ca_file": origin_cert}
    proxy = t.proxy(cfg)
    proxy_url = "http://127.0.0.1:%d" % proxy.port

    skipped, passed = [], []
    for name, tool, recipe in RECIPES:
        if tool and not shutil.which(tool) or (name == "chromium" and not shutil.which("certutil")):
            skipped.append(name)
            continue
        host = "%s.test" % name
        for origin, scheme in ((plain, "http"), (secure, "https")):
            url = "%s://%s:%d/recipe-%s" % (scheme, host, origin.port, scheme)
            before = origin.host(host)["count"]
            status, body, proxy_status = recipe(t, proxy_url, url, ca_cert)
            H.check(status == 200, "%s %s: status %s" % (name, scheme, status))
            echo = echo_of(body)
            H.check(echo.get("target") == "/recipe-%s" % scheme, "%s %s: the origin echoed %r" % (name, scheme, echo))
            # A browser may also ask for /favicon.ico.
            seen = origin.host(host)["count"] - before
            H.check(seen == 1 or (name == "chromium" and seen == 2),
                    "%s %s: the origin counted %d requests, expected 1" % (name, scheme, seen))
            if tool is None or name == "go":
                H.check("queue-wait=" in proxy_status, "%s %s: no Proxy-Status queue-wait (%r)" % (name, scheme, proxy_status))
        passed.append(name)
    H.log("recipes through the proxy, plain and intercepted: %s" % ", ".join(passed))
    if skipped:
        print("SKIP recipes whose client is not installed: %s (scripts/install-deps.sh installs them)"
              % ", ".join(skipped), flush=True)


if __name__ == "__main__":
    H.main(test, timeout=240)
