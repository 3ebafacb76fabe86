"""A helper server the test started (self.proc, a subprocess.Popen), controlled by
signals to its PID: killed (SIGKILL), hung (SIGSTOP) and resumed, stopped (SIGTERM, then
SIGKILL after 5 s). RedisStore and Dnsmasq are ones."""

import os
import signal
import subprocess


class SignalledProcess:
    proc = None

    def _signal(self, sig):
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, sig)

    def kill(self):
        """SIGKILL: its connections are reset, whatever it held is gone."""
        self._signal(signal.SIGCONT)
        self._signal(signal.SIGKILL)
        if self.proc:
            self.proc.wait(timeout=10)

    def pause(self):
        """SIGSTOP: hung; connections stay open and nothing answers until resume()."""
        self._signal(signal.SIGSTOP)

    def resume(self):
        self._signal(signal.SIGCONT)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self._signal(signal.SIGCONT)
            self._signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.kill()
