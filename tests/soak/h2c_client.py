"""A small HTTP/2 client with prior knowledge (h2c) over a plain socket, with one
absolute deadline per connection, on python3-h2. Every byte received is scanned for the
desync origin's stray markers (soak_client.scan_markers), header values included."""

import socket
import time

import h2.config
import h2.connection
import h2.events
import h2.exceptions

from soak_client import scan_markers


class H2Error(Exception):
    """kind: timeout | eof | reset | protocol | goaway"""

    def __init__(self, kind, detail=""):
        Exception.__init__(self, "%s%s" % (kind, (": " + detail) if detail else ""))
        self.kind, self.detail = kind, detail


class H2Conn:
    def __init__(self, port, deadline):
        self.deadline = deadline
        self.sock = socket.create_connection(("127.0.0.1", port),
                                             timeout=max(0.2, self.remaining()))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.conn = h2.connection.H2Connection(
            h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        self.conn.initiate_connection()
        self.streams = {}     # id -> {status, headers, interim, body, ended, reset}
        self.goaway = None    # the GOAWAY's error code, once one came
        self._tail = b""
        self.flush()

    def remaining(self):
        return self.deadline - time.monotonic()

    def flush(self):
        data = self.conn.data_to_send()
        if data:
            rem = self.remaining()
            if rem <= 0:
                raise H2Error("timeout", "deadline before send")
            self.sock.settimeout(rem)
            try:
                self.sock.sendall(data)
            except socket.timeout:
                raise H2Error("timeout", "send")
            except OSError as e:
                raise H2Error("reset", "send: %s: %s" % (type(e).__name__, e))

    def request(self, authority, path, method="GET", headers=()):
        """Opens a stream (no body); returns its id."""
        sid = self.conn.get_next_available_stream_id()
        fields = [(":method", method), (":scheme", "http"), (":authority", authority),
                  (":path", path)] + list(headers)
        self.conn.send_headers(sid, fields, end_stream=True)
        self.streams[sid] = {"status": None, "headers": {}, "interim": [], "body": b"",
                             "ended": False, "reset": None}
        return sid

    def done(self, sids):
        return all(self.streams[s]["ended"] or self.streams[s]["reset"] is not None
                   for s in sids)

    def pump(self, sids):
        """Reads until every stream in sids ended or was reset. Raises H2Error."""
        while not self.done(sids):
            rem = self.remaining()
            if rem <= 0:
                raise H2Error("timeout", "%d of %d streams open" % (
                    sum(1 for s in sids if not self.done([s])), len(sids)))
            self.sock.settimeout(rem)
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                continue
            except OSError as e:
                raise H2Error("reset", "%s: %s" % (type(e).__name__, e))
            if not data:
                raise H2Error("eof", "closed with %d streams open (GOAWAY %s)" % (
                    sum(1 for s in sids if not self.done([s])), self.goaway))
            self._tail = scan_markers(data, self._tail, "h2c")
            try:
                events = self.conn.receive_data(data)
            except h2.exceptions.ProtocolError as e:
                raise H2Error("protocol", "%s: %s" % (type(e).__name__, e))
            for ev in events:
                self._event(ev)
            self.flush()

    def _event(self, ev):
        r = self.streams.get(getattr(ev, "stream_id", None))
        if isinstance(ev, h2.events.InformationalResponseReceived) and r is not None:
            r["interim"].append(int(dict(ev.headers).get(":status", "0")))
        elif isinstance(ev, h2.events.ResponseReceived) and r is not None:
            r["headers"] = dict(ev.headers)
            r["status"] = int(r["headers"].get(":status", "0"))
            scan_markers(" ".join(r["headers"].values()).encode("utf-8", "replace"), b"",
                         "h2c header")
        elif isinstance(ev, h2.events.DataReceived):
            if r is not None:
                r["body"] += ev.data
            self.conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
        elif isinstance(ev, h2.events.StreamEnded) and r is not None:
            r["ended"] = True
        elif isinstance(ev, h2.events.StreamReset) and r is not None:
            r["reset"] = ev.error_code
        elif isinstance(ev, h2.events.ConnectionTerminated):
            self.goaway = ev.error_code

    def close(self):
        try:
            self.conn.close_connection()
            self.sock.sendall(self.conn.data_to_send())
        except Exception:  # noqa: BLE001 - closing anyway
            pass
        try:
            self.sock.close()
        except OSError:
            pass
