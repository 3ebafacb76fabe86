#!/usr/bin/python3
"""Writes the seed corpus of the http2_client fuzz target (tests/fuzz/corpus/http2_client/):
what an HTTP/2 origin (python3-h2) sends back to the three requests the target opens:
SETTINGS with a stream ceiling, responses with bodies, an interim response and trailers,
a reset, a GOAWAY. Run it again after changing the target's requests."""
import os

import h2.config
import h2.connection
import h2.events

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "http2_client")


def origin():
    """A server connection that has seen the target's preface and three requests."""
    client = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    client.initiate_connection()
    for sid, path, end in ((1, "/1", True), (3, "/2", True), (5, "/up", False)):
        client.send_headers(sid, [(":method", "POST" if sid == 5 else "GET"), (":scheme", "https"),
                                  (":authority", "origin.test"), (":path", path), ("accept", "*/*")],
                            end_stream=end)
    client.send_data(5, b"u" * 1000)
    server = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False, validate_outbound_headers=False))
    server.initiate_connection()
    server.update_settings({h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: 3})
    server.receive_data(client.data_to_send())
    return server


def seeds():
    s = origin()
    s.send_headers(1, [(":status", "200"), ("content-type", "text/plain")])
    s.send_data(1, b"hello", end_stream=True)
    s.send_headers(3, [(":status", "404")], end_stream=True)
    yield "responses", s.data_to_send()

    s = origin()
    s.send_headers(1, [(":status", "103"), ("link", "</a.css>; rel=preload")])
    s.send_headers(1, [(":status", "200")])
    s.send_data(1, b"x" * 3000)
    s.send_headers(1, [("x-checksum", "abc")], end_stream=True)
    yield "interim-and-trailers", s.data_to_send()

    s = origin()
    s.reset_stream(3, error_code=7)  # REFUSED_STREAM
    s.close_connection(error_code=0, last_stream_id=1)
    yield "reset-and-goaway", s.data_to_send()

    s = origin()
    s.send_headers(5, [(":status", "200"), ("retry-after", "5")])
    s.ping(b"12345678")
    s.send_data(5, b"y" * 100, end_stream=True)
    yield "upload-answered-and-ping", s.data_to_send()


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, data in seeds():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
        print("%s: %d bytes" % (name, len(data)))


if __name__ == "__main__":
    main()
