"""One proxy of the run under watch (Watched): its baseline (descriptors and RSS after
start-up, before any traffic), its 5-second samples, its last settle state and its
figures for the summary. Every proxy of the run (the soak proxy and the fleet proxies)
is a Watched and gets the same leak checks (verdicts.py)."""

from sampling import cpu_seconds, fd_count, fd_table, rss_kib, take_sample


class Watched:
    def __init__(self, proxy):
        self.proxy = proxy
        self.name = proxy.name
        self.fd_base = fd_count(proxy.pid)
        self.fd_base_table = fd_table(proxy.pid)
        self.rss_first = rss_kib(proxy.pid)
        self.samples = []
        self.end_sample = None
        self.last = None       # verdicts.settle's last proxy_admin.settle_state
        self.info = {}         # fd_end, fd_new, fd_max, rss, cpu, exit, log

    def sample(self, tally, t):
        s = take_sample(self.proxy, tally, t)
        self.samples.append(s)
        return s

    def finish(self, tally, t):
        """The end-of-run sample and CPU time (the proxy still runs)."""
        if self.proxy.alive():
            self.end_sample = take_sample(self.proxy, tally, t)
            self.info["cpu"] = cpu_seconds(self.proxy.pid)
