#!/usr/bin/python3
"""An HTTP/2 test origin (python3-h2): h2c with prior knowledge on a plain port, or h2 by
ALPN over TLS. It counts, per host (from :authority), the requests in flight as it sees
them (from the request's HEADERS to the end of its response) and their peak, the
connections that carried them, and records each request's method, path, fields and the
sha256 of its body.

Paths: /delay/<ms> answers after that long; /bytes/<n> answers n bytes (pattern(n));
(without content-length when the query says `nolength`); /echo answers JSON {"sha256",
"length", "headers", "trailers"} of the request; /early answers 413 at once, without reading the
request body, then resets the stream (NO_ERROR); /trailers answers "ok" without a
content-length, then TRAILERS; anything else "ok". `resets` counts streams the client reset.
Options: max_streams (SETTINGS_MAX_CONCURRENT_STREAMS; None: not sent), goaway_after
(a connection takes that many requests: with the last of them, GOAWAY naming it, later
streams are left unprocessed, and the close once the accepted ones are answered, as a
restarting server does; `refused` counts the streams left unprocessed)."""
import hashlib
import json
import socket
import ssl
import threading
import time

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import h2.settings
import hyperframe.frame


TRAILERS = [("x-checksum", "sha256=abc"), ("grpc-status", "0")]


def pattern(n):
    return (b"0123456789abcdef" * (n // 16 + 1))[:n]


def host_of(authority):
    a = authority.lower()
    if a.startswith("["):
        return a[1:a.find("]")]
    return a.rsplit(":", 1)[0] if a.count(":") == 1 else a


class _Stream:
    def __init__(self, headers):
        self.headers = headers
        self.body = hashlib.sha256()
        self.length = 0
        self.ready_at = None      # when its response may go (set at END_STREAM)
        self.pending = None       # response body still to send
        self.host = host_of(headers.get(":authority", ""))


class H2Origin:
    def __init__(self, tls=None, max_streams=None, goaway_after=None):
        """tls: (certfile, keyfile) for h2 over TLS, else h2c."""
        self.max_streams = max_streams
        self.goaway_after = goaway_after
        self.refused = 0
        self.lock = threading.Lock()
        self.hosts = {}
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(128)
        self.port = self.sock.getsockname()[1]
        self.context = None
        if tls:
            self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self.context.load_cert_chain(*tls)
            self.context.set_alpn_protocols(["h2"])
        self.stopped = False
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self):
        self.stopped = True
        self.sock.close()

    # ---- what the tests read ----
    def stats(self, host):
        with self.lock:
            return dict(self.hosts.get(host) or self._fresh())

    def _fresh(self):
        return {"in_flight": 0, "peak": 0, "count": 0, "connections": 0, "resets": 0, "requests": []}

    def _host(self, host):
        if host not in self.hosts:
            self.hosts[host] = self._fresh()
        return self.hosts[host]

    # ---- serving ----
    def _accept(self):
        while not self.stopped:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, sock):
        counted_hosts = set()
        try:
            if self.context:
                sock = self.context.wrap_socket(sock, server_side=True)
                if sock.selected_alpn_protocol() != "h2":
                    sock.close()
                    return
            sock.settimeout(0.005)
            conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False, header_encoding="utf-8"))
            if self.max_streams is not None:  # in the first SETTINGS, as servers do
                conn.local_settings = h2.settings.Settings(
                    client=False, initial_values={h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: self.max_streams})
            conn.initiate_connection()
            sock.sendall(conn.data_to_send())
            streams = {}
            accepted = 0
            going_away = False
            while not self.stopped:
                try:
                    data = sock.recv(65536)
                    if not data:
                        break
                    events = conn.receive_data(data)
                except (socket.timeout, ssl.SSLWantReadError):
                    events = []
                for ev in events:
                    if isinstance(ev, h2.events.RequestReceived):
                        if going_away:  # above the GOAWAY's last stream: not processed
                            with self.lock:
                                self.refused += 1
                            continue
                        accepted += 1
                        if self.goaway_after and accepted == self.goaway_after:
                            # GOAWAY naming this stream, written past h2's state machine
                            # (which would refuse to answer the streams it keeps).
                            goaway = hyperframe.frame.GoAwayFrame(0)
                            goaway.last_stream_id = ev.stream_id
                            sock.sendall(conn.data_to_send() + goaway.serialize())
                            going_away = True
                        s = streams[ev.stream_id] = _Stream(dict(ev.headers))
                        s.fields = list(ev.headers)
                        with self.lock:
                            h = self._host(s.host)
                            h["in_flight"] += 1
                            h["peak"] = max(h["peak"], h["in_flight"])
                            h["count"] += 1
                            if s.host not in counted_hosts:
                                counted_hosts.add(s.host)
                                h["connections"] += 1
                        if ev.stream_ended or s.headers.get(":path", "").startswith("/early"):
                            self._ready(s)  # /early: answers without reading the body
                    elif isinstance(ev, h2.events.DataReceived):
                        s = streams.get(ev.stream_id)
                        if s:
                            s.body.update(ev.data)
                            s.length += len(ev.data)
                        conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                    elif isinstance(ev, h2.events.TrailersReceived):
                        if ev.stream_id in streams:
                            streams[ev.stream_id].trailers = list(ev.headers)
                    elif isinstance(ev, h2.events.StreamEnded):
                        if ev.stream_id in streams and streams[ev.stream_id].ready_at is None:
                            self._ready(streams[ev.stream_id])
                    elif isinstance(ev, h2.events.StreamReset):
                        s = streams.pop(ev.stream_id, None)
                        if s:
                            self._done(s, reset=True)
                            with self.lock:
                                self._host(s.host)["resets"] += 1
                now = time.monotonic()
                for sid, s in list(streams.items()):
                    if s.ready_at is not None and s.pending is None and now >= s.ready_at:
                        self._respond(conn, sid, s)
                    if s.pending is not None:
                        self._send_body(conn, sid, s)
                        if not s.pending:
                            streams.pop(sid)
                            self._done(s)
                            if s.headers.get(":path", "").startswith("/early"):
                                try:  # RFC 9113 8.1: done with the request, whatever the client still sends
                                    conn.reset_stream(sid, error_code=0)
                                except h2.exceptions.StreamClosedError:
                                    pass
                out = conn.data_to_send()
                if out:
                    sock.sendall(out)
                if going_away and not streams:
                    time.sleep(0.05)
                    break
            for s in streams.values():
                self._done(s, reset=True)
                with self.lock:
                    self._host(s.host)["resets"] += 1
        except (OSError, ssl.SSLError, h2.exceptions.ProtocolError):
            pass
        finally:
            try:
                sock.close()
            except OSError:
                pass

    def _ready(self, s):
        path = s.headers.get(":path", "/")
        delay = 0.0
        if path.startswith("/delay/"):
            delay = int(path.split("/")[2]) / 1000.0
        s.ready_at = time.monotonic() + delay

    def _respond(self, conn, sid, s):
        path = s.headers.get(":path", "/")
        if path.startswith("/bytes/"):
            body = pattern(int(path.split("/")[2].split("?")[0]))
        elif path.startswith("/echo"):
            body = json.dumps({"sha256": s.body.hexdigest(), "length": s.length,
                               "headers": s.fields, "trailers": getattr(s, "trailers", [])}).encode()
        else:
            body = b"ok"
        headers = [(":status", "413" if path.startswith("/early") else "200"), ("content-type", "text/plain")]
        if "nolength" not in path and not path.startswith("/trailers"):
            headers.append(("content-length", str(len(body))))
        head_only = s.headers.get(":method") == "HEAD"
        conn.send_headers(sid, headers, end_stream=head_only)
        s.pending = b"" if head_only else body
        s.end_sent = head_only
        with self.lock:
            self._host(s.host)["requests"].append({"method": s.headers.get(":method"), "path": path,
                                                    "sha256": s.body.hexdigest(), "length": s.length,
                                                    "fields": s.fields})

    def _send_body(self, conn, sid, s):
        try:
            while s.pending:
                room = min(conn.local_flow_control_window(sid), conn.max_outbound_frame_size)
                if room <= 0:
                    return
                conn.send_data(sid, s.pending[:room])
                s.pending = s.pending[room:]
            if not s.end_sent:
                if s.headers.get(":path", "").startswith("/trailers"):
                    conn.send_headers(sid, TRAILERS, end_stream=True)
                else:
                    conn.end_stream(sid)
                s.end_sent = True
        except h2.exceptions.StreamClosedError:
            s.pending = b""

    def _done(self, s, reset=False):
        with self.lock:
            self._host(s.host)["in_flight"] -= 1
