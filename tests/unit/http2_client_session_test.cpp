// http2::client_session (the origin side) against http2::server_session (standing in for
// an HTTP/2 origin), bytes passed by hand between the two: no sockets. Each side's
// events are recorded as the other side's peer would see them.
#include "politeproxy/http2/client_session.hpp"
#include "politeproxy/http2/server_session.hpp"

#include <nghttp2/nghttp2.h>

#include <doctest/doctest.h>

#include <cstring>
#include <algorithm>
#include <map>
#include <string>
#include <vector>

using namespace politeproxy::http2;
using politeproxy::field;
using politeproxy::response_head;

namespace {

std::span<const std::uint8_t> bytes_of(std::string_view s) {
    return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

std::string text(std::span<const std::uint8_t> data) { return {reinterpret_cast<const char*>(data.data()), data.size()}; }

// What the proxy's origin side heard; it forwards every body byte at once.
struct origin_side : origin_events {
    client_session* session = nullptr;
    std::vector<response_head> responses;
    std::vector<std::int32_t> streams;  ///< the stream of each response
    std::map<std::int32_t, std::string> bodies;
    std::vector<std::int32_t> ended;
    std::map<std::int32_t, std::uint32_t> closed;
    std::vector<std::optional<std::uint32_t>> ceilings;
    std::vector<std::pair<std::int32_t, std::uint32_t>> goaways;
    std::map<std::int32_t, std::vector<field>> trailers;
    void on_response(std::int32_t stream, response_head head) override {
        streams.push_back(stream);
        responses.push_back(std::move(head));
    }
    void on_trailers(std::int32_t stream, std::vector<field> fields) override {
        CHECK(std::find(ended.begin(), ended.end(), stream) == ended.end());  // before the end
        trailers[stream] = std::move(fields);
    }
    void on_body(std::int32_t stream, std::span<const std::uint8_t> data) override {
        bodies[stream] += text(data);
        session->consumed(stream, data.size());
    }
    void on_body_end(std::int32_t stream) override { ended.push_back(stream); }
    void on_stream_closed(std::int32_t stream, std::uint32_t error_code) override { closed[stream] = error_code; }
    void on_settings(std::optional<std::uint32_t> streams) override { ceilings.push_back(streams); }
    void on_goaway(std::int32_t last, std::uint32_t error_code) override { goaways.emplace_back(last, error_code); }
};

// The origin: records requests and their bodies, consumes every body byte at once.
struct origin : session_events {
    server_session* session = nullptr;
    std::vector<request_head> requests;
    std::map<std::int32_t, std::string> bodies;
    std::vector<std::int32_t> ended;
    std::map<std::int32_t, std::vector<field>> trailers;
    void on_request(request_head head) override { requests.push_back(std::move(head)); }
    void on_trailers(std::int32_t stream, std::vector<field> fields) override { trailers[stream] = std::move(fields); }
    void on_body(std::int32_t stream, std::span<const std::uint8_t> data) override {
        bodies[stream] += text(data);
        session->consumed(stream, data.size());
    }
    void on_body_end(std::int32_t stream) override { ended.push_back(stream); }
    void on_stream_closed(std::int32_t, std::uint32_t) override {}
};

// A proxy's client_session and an origin's server_session joined back to back.
template <class ProxyEvents = origin_side>
struct joined {
    ProxyEvents proxy_events;
    origin origin_events;
    client_session proxy;
    server_session server;

    explicit joined(server_session::settings s = {}, client_session::settings c = {})
        : proxy(proxy_events, c), server(origin_events, s, politeproxy::clock::now()) {
        proxy_events.session = &proxy;
        origin_events.session = &server;
    }

    // Moves bytes both ways until neither side has more to send.
    void pump() {
        for (int round = 0; round < 1000; ++round) {
            std::string up, down;
            proxy.produce(up);
            if (!up.empty()) server.receive(bytes_of(up), politeproxy::clock::now());
            server.produce(down);
            if (!down.empty()) proxy.receive(bytes_of(down));
            if (up.empty() && down.empty()) return;
        }
        FAIL("the sessions never went quiet");
    }
};

using pair = joined<>;

const std::vector<field> no_fields;

}  // namespace

TEST_CASE("the origin's SETTINGS_MAX_CONCURRENT_STREAMS reaches the owner as the session's ceiling") {
    pair p(server_session::settings{.max_concurrent_streams = 3});
    p.pump();
    REQUIRE(p.proxy_events.ceilings.size() == 1);
    CHECK(p.proxy_events.ceilings.front() == 3);
    CHECK(p.proxy.accepts_streams());
}

TEST_CASE("an origin whose SETTINGS set no stream limit reaches the owner as no ceiling") {
    origin_side events;
    client_session proxy(events, {});
    events.session = &proxy;
    const std::uint8_t empty_settings[] = {0, 0, 0, 4, 0, 0, 0, 0, 0};  // length 0, type SETTINGS, stream 0
    CHECK(proxy.receive(empty_settings));
    REQUIRE(events.ceilings.size() == 1);
    CHECK_FALSE(events.ceilings.front().has_value());
}

TEST_CASE("a request goes out with its pseudo-header fields, the response comes back with its body") {
    pair p;
    const std::vector<field> fields{{"accept", "*/*"}, {"user-agent", "crawler"}};
    const std::int32_t id = p.proxy.request("GET", "https", "origin.test:8443", "/a?b=c", fields, true);
    REQUIRE(id > 0);
    CHECK(p.proxy.open_streams() == 1);
    p.pump();
    REQUIRE(p.origin_events.requests.size() == 1);
    const request_head& seen = p.origin_events.requests.front();
    CHECK(seen.method == "GET");
    CHECK(seen.scheme == "https");
    CHECK(seen.authority == "origin.test:8443");
    CHECK(seen.path == "/a?b=c");
    CHECK(seen.end_stream);
    REQUIRE(seen.fields.size() == 2);
    CHECK(seen.fields[1].value == "crawler");

    const std::vector<field> answer{{"content-type", "text/plain"}, {"retry-after", "5"}};
    p.server.respond(seen.stream, 200, answer, false);
    p.server.send_body(seen.stream, bytes_of("hello"), true);
    p.pump();
    REQUIRE(p.proxy_events.responses.size() == 1);
    CHECK(p.proxy_events.streams[0] == id);
    CHECK(p.proxy_events.responses[0].status == 200);
    CHECK_FALSE(p.proxy_events.responses[0].end_stream);
    REQUIRE(p.proxy_events.responses[0].fields.size() == 2);
    CHECK(p.proxy_events.responses[0].fields[1].name == "retry-after");
    CHECK(p.proxy_events.bodies[id] == "hello");
    CHECK(p.proxy_events.ended == std::vector<std::int32_t>{id});
    CHECK(p.proxy_events.closed.at(id) == 0);
    CHECK(p.proxy.open_streams() == 0);
}

TEST_CASE("a response's trailer fields reach the owner before its end; a body without them ends the stream") {
    pair p;
    const std::int32_t with = p.proxy.request("GET", "https", "origin.test", "/with", no_fields, true);
    const std::int32_t without = p.proxy.request("GET", "https", "origin.test", "/without", no_fields, true);
    p.pump();
    REQUIRE(p.origin_events.requests.size() == 2);
    const std::vector<field> trailers{{"x-checksum", "sha256=abc"}, {"grpc-status", "0"}};
    p.server.respond(p.origin_events.requests[0].stream, 200, no_fields, false);
    p.server.send_body(p.origin_events.requests[0].stream, bytes_of("body"), true, trailers);
    p.server.respond(p.origin_events.requests[1].stream, 200, no_fields, false);
    p.server.send_body(p.origin_events.requests[1].stream, {}, true, trailers);  // no DATA, then the trailers
    p.pump();
    CHECK(p.proxy_events.bodies[with] == "body");
    REQUIRE(p.proxy_events.trailers.count(with) == 1);
    REQUIRE(p.proxy_events.trailers[with].size() == 2);
    CHECK(p.proxy_events.trailers[with][0].name == "x-checksum");
    CHECK(p.proxy_events.trailers[with][1].value == "0");
    REQUIRE(p.proxy_events.trailers.count(without) == 1);
    CHECK(p.proxy_events.ended.size() == 2);
    CHECK(p.proxy_events.closed.at(with) == 0);
    CHECK(p.proxy_events.closed.at(without) == 0);
}

TEST_CASE("a request's trailer fields reach the server's owner after its body") {
    pair p;
    const std::int32_t id = p.proxy.request("POST", "https", "origin.test", "/up", no_fields, false);
    const std::vector<field> trailers{{"x-upload-digest", "xyz"}};
    p.proxy.send_body(id, bytes_of("payload"), true, trailers);
    p.pump();
    REQUIRE(p.origin_events.requests.size() == 1);
    const std::int32_t seen = p.origin_events.requests[0].stream;
    CHECK(p.origin_events.bodies[seen] == "payload");
    REQUIRE(p.origin_events.trailers[seen].size() == 1);
    CHECK(p.origin_events.trailers[seen][0].value == "xyz");
    CHECK(p.origin_events.ended == std::vector<std::int32_t>{seen});
}

TEST_CASE("200 000-byte bodies both ways, through flow-control windows of 64 KiB") {
    pair p;
    std::string upload(200000, '\0'), download(200000, '\0');
    for (std::size_t i = 0; i < upload.size(); ++i) {
        upload[i] = static_cast<char>(i * 7 + 1);
        download[i] = static_cast<char>(i * 13 + 5);
    }
    const std::int32_t id = p.proxy.request("POST", "http", "origin.test", "/up", no_fields, false);
    // The body arrives as the client sends it: in pieces, the end with the last.
    for (std::size_t at = 0; at < upload.size(); at += 30000) {
        const std::size_t n = std::min<std::size_t>(30000, upload.size() - at);
        p.proxy.send_body(id, bytes_of(std::string_view(upload).substr(at, n)), at + n == upload.size());
        p.pump();
    }
    REQUIRE(p.origin_events.requests.size() == 1);
    const std::int32_t at_origin = p.origin_events.requests[0].stream;
    CHECK(p.origin_events.bodies[at_origin] == upload);
    CHECK(p.origin_events.ended == std::vector<std::int32_t>{at_origin});
    CHECK(p.proxy.queued(id) == 0);

    p.server.respond(at_origin, 200, no_fields, false);
    p.server.send_body(at_origin, bytes_of(download), true);
    p.pump();
    CHECK(p.proxy_events.bodies[id] == download);
    CHECK(p.proxy_events.closed.at(id) == 0);
}

TEST_CASE("a body the owner does not pass on holds the origin at the window") {
    struct slow : origin_side {
        void on_body(std::int32_t stream, std::span<const std::uint8_t> data) override {
            bodies[stream] += text(data);  // not consumed: the client is slow
        }
    };
    joined<slow> p;
    const std::int32_t id = p.proxy.request("GET", "http", "origin.test", "/", no_fields, true);
    p.pump();
    const std::string big(200000, 'x');
    const std::int32_t at_origin = p.origin_events.requests.at(0).stream;
    p.server.respond(at_origin, 200, no_fields, false);
    p.server.send_body(at_origin, bytes_of(big), true);
    p.pump();
    CHECK(p.proxy_events.bodies[id].size() == 65535);  // the initial window, and no more
    CHECK(p.server.queued(at_origin) == big.size() - 65535);
    p.proxy.consumed(id, p.proxy_events.bodies[id].size());
    p.pump();
    CHECK(p.proxy_events.bodies[id].size() > 65535);
}

TEST_CASE("interim responses are dropped; trailers do not become a second response") {
    // The origin here is nghttp2 itself, to send a 103 and trailers.
    struct raw_origin {
        nghttp2_session* session = nullptr;
        std::int32_t stream = 0;
        raw_origin() {
            nghttp2_session_callbacks* cb = nullptr;
            nghttp2_session_callbacks_new(&cb);
            nghttp2_session_callbacks_set_on_frame_recv_callback(cb, [](nghttp2_session*, const nghttp2_frame* f, void* u) {
                if (f->hd.type == NGHTTP2_HEADERS) static_cast<raw_origin*>(u)->stream = f->hd.stream_id;
                return 0;
            });
            nghttp2_session_server_new(&session, cb, this);
            nghttp2_session_callbacks_del(cb);
            nghttp2_submit_settings(session, NGHTTP2_FLAG_NONE, nullptr, 0);
        }
        ~raw_origin() { nghttp2_session_del(session); }
    } o;
    origin_side events;
    client_session proxy(events, {});
    events.session = &proxy;
    const auto pump = [&] {
        for (int i = 0; i < 100; ++i) {
            std::string up;
            proxy.produce(up);
            if (!up.empty()) nghttp2_session_mem_recv(o.session, bytes_of(up).data(), up.size());
            const std::uint8_t* data = nullptr;
            std::string down;
            for (ssize_t n; (n = nghttp2_session_mem_send(o.session, &data)) > 0;)
                down.append(reinterpret_cast<const char*>(data), static_cast<std::size_t>(n));
            if (!down.empty()) proxy.receive(bytes_of(down));
            if (up.empty() && down.empty()) return;
        }
    };
    const auto nv = [](const char* n, const char* v) {
        return nghttp2_nv{(std::uint8_t*)n, (std::uint8_t*)v, std::strlen(n), std::strlen(v), NGHTTP2_NV_FLAG_NONE};
    };
    const std::int32_t id = proxy.request("GET", "http", "origin.test", "/", no_fields, true);
    pump();
    REQUIRE(o.stream == id);
    const nghttp2_nv early[] = {nv(":status", "103"), nv("link", "</a.css>; rel=preload")};
    nghttp2_submit_headers(o.session, NGHTTP2_FLAG_NONE, id, nullptr, early, 2, nullptr);
    const nghttp2_nv final[] = {nv(":status", "200"), nv("x-final", "1")};
    nghttp2_submit_headers(o.session, NGHTTP2_FLAG_NONE, id, nullptr, final, 2, nullptr);
    const nghttp2_nv trailers[] = {nv("x-checksum", "abc")};
    nghttp2_submit_headers(o.session, NGHTTP2_FLAG_END_STREAM, id, nullptr, trailers, 1, nullptr);
    pump();
    REQUIRE(events.responses.size() == 1);
    CHECK(events.responses[0].status == 200);
    REQUIRE(events.responses[0].fields.size() == 1);
    CHECK(events.responses[0].fields[0].name == "x-final");
    CHECK(events.ended == std::vector<std::int32_t>{id});
    CHECK(events.closed.at(id) == 0);
}

TEST_CASE("GOAWAY: no new streams; streams the origin did not process close as refused, to be retried") {
    pair p;
    const std::int32_t first = p.proxy.request("GET", "http", "origin.test", "/1", no_fields, true);
    p.pump();
    p.server.go_away();  // the origin processed the first stream only
    std::string late;
    const std::int32_t second = p.proxy.request("GET", "http", "origin.test", "/2", no_fields, true);
    p.proxy.produce(late);  // sent before the GOAWAY arrives
    std::string goaway;
    p.server.produce(goaway);
    p.server.receive(bytes_of(late), politeproxy::clock::now());
    p.proxy.receive(bytes_of(goaway));
    REQUIRE(p.proxy_events.goaways.size() == 1);
    CHECK(p.proxy_events.goaways[0].first == first);
    CHECK(p.proxy_events.closed.at(second) == NGHTTP2_REFUSED_STREAM);
    CHECK_FALSE(p.proxy.accepts_streams());
    CHECK(p.proxy.request("GET", "http", "origin.test", "/3", no_fields, true) == 0);
    // The processed stream is still served to its end.
    p.server.respond(p.origin_events.requests.at(0).stream, 204, no_fields, true);
    p.pump();
    REQUIRE(p.proxy_events.responses.size() == 1);
    CHECK(p.proxy_events.streams[0] == first);
    CHECK(p.proxy_events.closed.at(first) == 0);
}

TEST_CASE("a response header block over the bound resets its stream; the session goes on") {
    pair p({}, client_session::settings{.max_header_bytes = 1024});
    const std::int32_t id = p.proxy.request("GET", "http", "origin.test", "/", no_fields, true);
    p.pump();
    const std::vector<field> huge{{"x-big", std::string(2000, 'a')}};
    p.server.respond(p.origin_events.requests.at(0).stream, 200, huge, true);
    p.pump();
    CHECK(p.proxy_events.responses.empty());
    CHECK(p.proxy_events.closed.at(id) != 0);
    const std::int32_t next = p.proxy.request("GET", "http", "origin.test", "/next", no_fields, true);
    p.pump();
    p.server.respond(p.origin_events.requests.at(1).stream, 200, no_fields, true);
    p.pump();
    REQUIRE(p.proxy_events.responses.size() == 1);
    CHECK(p.proxy_events.streams[0] == next);
}

TEST_CASE("PING keeps an idle session honest: the origin answers") {
    pair p;
    p.pump();
    p.proxy.ping();
    p.pump();
    CHECK(p.proxy.pings_acked() == 1);
    CHECK(p.proxy.alive());
}

TEST_CASE("bytes that are not HTTP/2 from the origin end the session") {
    origin_side events;
    client_session proxy(events, {});
    events.session = &proxy;
    std::string preface;
    proxy.produce(preface);
    CHECK_FALSE(proxy.receive(bytes_of("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")));
}
