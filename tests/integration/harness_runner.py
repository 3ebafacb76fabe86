"""Running one test: TestContext (its temporary directory, and the origins, proxies,
stores it starts, all stopped at cleanup), find_binary (--proxy PATH or
$POLITEPROXY_BIN) and main(), which runs a test function under a hard timeout, prints
"PASS name" or "FAIL name: why" with the proxies' output, and exits 0, 1, 3 (timeout)
or 4 (signal). `--store single|cluster|sentinel` (default single) picks the kind of
fleet store the fleet tests run against (t.store_kind, fleet_common.make_store)."""
import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback

from harness_checks import SLOW, check, log
from harness_config import dump_config
from harness_proxy import Proxy, _kill_all_live, _pdeathsig
from origin import Origin, make_cert


STORE_KINDS = ("single", "cluster", "sentinel")
# what starting a store of each kind may add to a test's hard timeout (seconds)
STORE_SETUP_ALLOWANCE = {"single": 0, "cluster": 30, "sentinel": 30}


class TestContext:
    def __init__(self, binary, verbose=False, store_kind="single"):
        self.binary = binary
        self.verbose = verbose
        self.store_kind = store_kind
        self._tmp = tempfile.TemporaryDirectory(prefix="pp-it-")
        self.workdir = self._tmp.name
        self.proxies = []
        self.origins = []
        self.stores = []
        self._cert = None

    def origin(self, tls=False, address="127.0.0.1", port=0):
        kw = {}
        if tls:
            kw["certfile"], kw["keyfile"] = self.cert()
        o = Origin(tls=tls, verbose=self.verbose, address=address, port=port, **kw).start()
        self.origins.append(o)
        log("origin%s on %s:%d" % (" (TLS)" if tls else "", address, o.port))
        return o

    def redis(self):
        """A redis-server of this test's own (see redis_store.py), started."""
        from redis_store import RedisStore
        store = RedisStore(self.workdir)
        self.stores.append(store)
        return store.start()

    def redis_cluster(self, masters=3):
        """A Redis Cluster of this test's own (see redis_cluster.py), started."""
        from redis_cluster import RedisCluster
        cluster = RedisCluster(self.workdir, masters)
        self.stores.append(cluster)
        return cluster.start()

    def redis_sentinel(self, name="pp-master"):
        """A master, a replica and 3 sentinels of this test's own (see redis_sentinel.py), started."""
        from redis_sentinel import RedisSentinelSet
        sentinels = RedisSentinelSet(self.workdir, name)
        self.stores.append(sentinels)
        return sentinels.start()

    def dns(self, zone="dns.test", ttl=3):
        """A DNS server of this test's own (dnsmasq_server.py) answering for `zone`, started."""
        from dnsmasq_server import Dnsmasq
        server = Dnsmasq(self.workdir, zone, ttl)
        self.stores.append(server)
        return server.start()

    def parent(self, kind, user=None, password=None, names=None):
        """A parent proxy of this test's own, started: Squid or tinyproxy (parent_proxies.py)."""
        from parent_proxies import ParentProxy
        p = ParentProxy(kind, self.workdir, user=user, password=password, names=names)
        self.stores.append(p)
        return p.start()

    def prometheus(self, targets):
        """A Prometheus of this test's own (see prometheus_server.py) scraping `targets`, started."""
        from prometheus_server import PrometheusServer
        prom = PrometheusServer(self.workdir, targets)
        self.stores.append(prom)  # every helper server with a stop(), stopped at cleanup
        return prom.start()

    def cert(self):
        if self._cert is None:
            self._cert = make_cert(self.workdir, "tls.test")
        return self._cert

    def proxy(self, config, name=None, extra_args=()):
        name = name or "proxy%d" % (len(self.proxies) + 1)
        p = Proxy(self.binary, config, self.workdir, name, extra_args)
        self.proxies.append(p)
        return p.start()

    def gen_ca(self):
        """`politeproxy --gen-ca` into the work directory: (ca.pem, ca.key) paths."""
        d = os.path.join(self.workdir, "ca")
        os.mkdir(d)
        r = subprocess.run([self.binary, "--gen-ca", d], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, timeout=20, preexec_fn=_pdeathsig)
        check(r.returncode == 0, "--gen-ca: %s" % r.stderr)
        return os.path.join(d, "ca.pem"), os.path.join(d, "ca.key")

    def check_config(self, config, name="check"):
        """Run --check-config on a config (dict or YAML text).
        Returns (exit code, stdout, stderr, path, text)."""
        path = os.path.join(self.workdir, "%s.yaml" % name)
        text = config if isinstance(config, str) else dump_config(config)
        with open(path, "w") as f:
            f.write(text)
        r = subprocess.run([self.binary, "--check-config", path], stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=20,
                           preexec_fn=_pdeathsig)
        return (r.returncode, r.stdout.decode("utf-8", "replace"),
                r.stderr.decode("utf-8", "replace"), path, text)

    def dump_proxy_output(self):
        for p in self.proxies:
            state = "running" if p.alive() else "exit code %s" % (
                p.proc.returncode if p.proc else "n/a")
            print("---- %s (pid %s, %s) output tail ----" % (p.name, p.pid, state))
            print(p.tail(80))
        sys.stdout.flush()

    def cleanup(self):
        for p in self.proxies:
            try:
                p.stop()
            except Exception as e:  # noqa: BLE001
                log("stopping %s: %s" % (p.name, e))
                p.kill_now()
        for o in self.origins:
            try:
                o.stop()
            except Exception:  # noqa: BLE001
                pass
        for s in self.stores:
            s.stop()
        self._tmp.cleanup()


def parse_args(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--proxy", default=os.environ.get("POLITEPROXY_BIN"),
                    help="path of the politeproxy binary (default: $POLITEPROXY_BIN)")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--store", choices=STORE_KINDS, default="single",
                    help="the fleet store the fleet tests use: one redis-server (default), "
                         "a Redis Cluster of 3 masters, or a master and replica behind 3 sentinels")
    return ap.parse_args(argv)


def find_binary(argv):
    a = parse_args(argv)
    if not a.proxy:
        print("FAIL: no proxy binary: pass --proxy PATH or set POLITEPROXY_BIN",
              file=sys.stderr)
        sys.exit(2)
    if not (os.path.isfile(a.proxy) and os.access(a.proxy, os.X_OK)):
        print("FAIL: proxy binary %r does not exist or is not executable" % a.proxy,
              file=sys.stderr)
        sys.exit(2)
    return os.path.abspath(a.proxy), a.verbose


def main(test_fn, timeout=45, argv=None):
    """Run test_fn(TestContext) with a hard timeout; exit 0 on success, 1 on failure,
    3 on timeout. Every proxy started is stopped (by PID) whatever happens."""
    name = os.path.splitext(os.path.basename(sys.argv[0]))[0]
    argv = sys.argv[1:] if argv is None else argv
    binary, verbose = find_binary(argv)
    store_kind = parse_args(argv).store
    if store_kind != "single":
        name += "." + store_kind
    timeout = timeout * SLOW + STORE_SETUP_ALLOWANCE[store_kind] * SLOW
    ctx = TestContext(binary, verbose, store_kind)

    def on_timeout():
        print("FAIL %s: hard timeout: still running after %ss" % (name, timeout),
              flush=True)
        try:
            print("".join(traceback.format_stack(sys._current_frames()[main_ident])),
                  flush=True)
        except Exception:  # noqa: BLE001
            pass
        ctx.dump_proxy_output()
        _kill_all_live()
        shutil.rmtree(ctx.workdir, ignore_errors=True)
        os._exit(3)

    def on_signal(signum, _frame):
        print("FAIL %s: killed by signal %d" % (name, signum), flush=True)
        ctx.dump_proxy_output()
        _kill_all_live()
        shutil.rmtree(ctx.workdir, ignore_errors=True)
        os._exit(4)

    main_ident = threading.get_ident()
    watchdog = threading.Timer(timeout, on_timeout)
    watchdog.daemon = True
    watchdog.start()
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    rc = 1
    t0 = time.monotonic()
    try:
        test_fn(ctx)
        rc = 0
    except AssertionError as e:
        print("FAIL %s: %s" % (name, e), flush=True)
        ctx.dump_proxy_output()
    except Exception:  # noqa: BLE001
        print("FAIL %s: unexpected error:\n%s" % (name, traceback.format_exc()), flush=True)
        ctx.dump_proxy_output()
    finally:
        try:
            ctx.cleanup()
        except Exception:  # noqa: BLE001
            traceback.print_exc()
            _kill_all_live()
        watchdog.cancel()
    if rc == 0:
        print("PASS %s (%.1fs)" % (name, time.monotonic() - t0), flush=True)
    sys.exit(rc)
