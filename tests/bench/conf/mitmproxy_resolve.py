"""mitmproxy addon of the intercept benchmark: *.bench.test connects to 127.0.0.1 (the
other proxies are told so in their configs; /etc/hosts is not touched)."""


class Resolve:
    def server_connect(self, data):
        host, port = data.server.address
        if host.endswith(".bench.test"):
            data.server.address = ("127.0.0.1", port)


addons = [Resolve()]
