// http2::server_session against nghttp2's own client session, bytes passed by hand: no
// sockets. The client side records what a client would see.
#include "politeproxy/http2/server_session.hpp"

#include <nghttp2/nghttp2.h>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <vector>

using namespace politeproxy::http2;
using politeproxy::field;
using time_point = politeproxy::clock::time_point;
using namespace std::chrono_literals;

namespace {

std::span<const std::uint8_t> bytes_of(std::string_view s) {
    return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

// What the proxy side heard.
struct recorder : session_events {
    std::vector<request_head> requests;
    std::map<std::int32_t, std::string> bodies;
    std::vector<std::int32_t> ended;
    std::map<std::int32_t, std::uint32_t> closed;
    void on_request(request_head head) override { requests.push_back(std::move(head)); }
    void on_body(std::int32_t stream, std::span<const std::uint8_t> data) override {
        bodies[stream].append(reinterpret_cast<const char*>(data.data()), data.size());
    }
    void on_body_end(std::int32_t stream) override { ended.push_back(stream); }
    void on_stream_closed(std::int32_t stream, std::uint32_t error_code) override { closed[stream] = error_code; }
};

// nghttp2 as the client.
struct client {
    nghttp2_session* session = nullptr;
    std::map<std::int32_t, std::string> status, body;
    std::map<std::int32_t, std::vector<std::pair<std::string, std::string>>> fields;  // the rest of the head, in order
    std::map<std::int32_t, std::uint32_t> closed;
    std::uint32_t peer_max_streams = 0;
    bool goaway = false;
    std::uint32_t goaway_error = 0;

    client() {
        nghttp2_session_callbacks* cb = nullptr;
        nghttp2_session_callbacks_new(&cb);
        nghttp2_session_callbacks_set_on_header_callback(
            cb, [](nghttp2_session*, const nghttp2_frame* f, const std::uint8_t* n, std::size_t nl,
                   const std::uint8_t* v, std::size_t vl, std::uint8_t, void* u) {
                const std::string_view name(reinterpret_cast<const char*>(n), nl), value(reinterpret_cast<const char*>(v), vl);
                auto* c = static_cast<client*>(u);
                if (name == ":status") c->status[f->hd.stream_id] = value;
                else c->fields[f->hd.stream_id].emplace_back(name, value);
                return 0;
            });
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(
            cb, [](nghttp2_session*, std::uint8_t, std::int32_t id, const std::uint8_t* d, std::size_t l, void* u) {
                static_cast<client*>(u)->body[id].append(reinterpret_cast<const char*>(d), l);
                return 0;
            });
        nghttp2_session_callbacks_set_on_stream_close_callback(
            cb, [](nghttp2_session*, std::int32_t id, std::uint32_t e, void* u) {
                static_cast<client*>(u)->closed[id] = e;
                return 0;
            });
        nghttp2_session_callbacks_set_on_frame_recv_callback(cb, [](nghttp2_session* s, const nghttp2_frame* f, void* u) {
            auto* c = static_cast<client*>(u);
            if (f->hd.type == NGHTTP2_SETTINGS && !(f->hd.flags & NGHTTP2_FLAG_ACK))
                c->peer_max_streams = nghttp2_session_get_remote_settings(s, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);
            if (f->hd.type == NGHTTP2_GOAWAY) {
                c->goaway = true;
                c->goaway_error = f->goaway.error_code;
            }
            return 0;
        });
        nghttp2_session_client_new(&session, cb, this);
        nghttp2_session_callbacks_del(cb);
        nghttp2_submit_settings(session, NGHTTP2_FLAG_NONE, nullptr, 0);
    }
    ~client() { nghttp2_session_del(session); }

    std::int32_t get(const std::string& authority, const std::string& path,
                      std::vector<std::pair<std::string, std::string>> extra = {}) {
        std::vector<std::pair<std::string, std::string>> h = {
            {":method", "GET"}, {":scheme", "https"}, {":authority", authority}, {":path", path}};
        h.insert(h.end(), extra.begin(), extra.end());
        std::vector<nghttp2_nv> nva;
        for (auto& [n, v] : h)
            nva.push_back({reinterpret_cast<std::uint8_t*>(n.data()), reinterpret_cast<std::uint8_t*>(v.data()), n.size(),
                           v.size(), NGHTTP2_NV_FLAG_NONE});
        return nghttp2_submit_request(session, nullptr, nva.data(), nva.size(), nullptr, nullptr);
    }

    std::string produce() {
        std::string out;
        const std::uint8_t* d = nullptr;
        for (ssize_t n; (n = nghttp2_session_mem_send(session, &d)) > 0;) out.append(reinterpret_cast<const char*>(d), n);
        return out;
    }
};

const time_point t0{std::chrono::hours(1000)};

// Moves bytes both ways until neither side has anything to send.
void pump(client& c, server_session& s, time_point now = t0) {
    for (int i = 0; i < 100; ++i) {
        const std::string up = c.produce();
        if (!up.empty()) REQUIRE(s.receive(bytes_of(up), now));
        std::string down;
        s.produce(down);
        if (!down.empty()) REQUIRE(nghttp2_session_mem_recv(c.session, bytes_of(down).data(), down.size()) >= 0);
        if (up.empty() && down.empty()) return;
    }
    FAIL("the two sides never went quiet");
}

}  // namespace

TEST_CASE("requests arrive as heads with their fields; responses reach the client; max streams is advertised") {
    recorder heard;
    server_session server(heard, {.max_concurrent_streams = 7}, t0);
    client c;
    const auto a = c.get("example.test", "/a", {{"accept", "text/html"}});
    const auto b = c.get("example.test:8443", "/b?q=1");
    pump(c, server);

    CHECK(c.peer_max_streams == 7);
    REQUIRE(heard.requests.size() == 2);
    const request_head& first = heard.requests[0];
    CHECK(first.stream == a);
    CHECK(first.method == "GET");
    CHECK(first.scheme == "https");
    CHECK(first.authority == "example.test");
    CHECK(first.path == "/a");
    CHECK(first.end_stream);
    REQUIRE(first.fields.size() == 1);
    CHECK(first.fields[0].name == "accept");
    CHECK(heard.requests[1].authority == "example.test:8443");
    CHECK(heard.requests[1].path == "/b?q=1");

    const std::vector<field> headers = {{"content-type", "text/plain"}};
    server.respond(a, 200, headers, false);
    server.respond(b, 404, {}, true);
    pump(c, server);
    CHECK(c.status[a] == "200");
    CHECK(c.status[b] == "404");
    CHECK(c.closed.count(b) == 1);
    CHECK(heard.closed.count(b) == 1);
    CHECK(c.closed.count(a) == 0);  // its body is still to come

    // The body goes as it is given, the end when it is said.
    server.send_body(a, bytes_of("hello, "), false);
    pump(c, server);
    CHECK(c.body[a] == "hello, ");
    server.send_body(a, bytes_of("world"), true);
    pump(c, server);
    CHECK(c.body[a] == "hello, world");
    CHECK(c.closed[a] == NGHTTP2_NO_ERROR);
    CHECK(heard.closed[a] == NGHTTP2_NO_ERROR);
    CHECK(server.alive());
}

TEST_CASE("a head of more fields than fit on the stack reaches the client whole, in order") {
    recorder heard;
    server_session server(heard, {}, t0);
    client c;
    const auto id = c.get("example.test", "/many");
    pump(c, server);
    std::vector<field> fields;  // past the 32 name_values keeps on the stack
    for (int i = 0; i < 40; ++i) fields.push_back({"x-field-" + std::to_string(i), std::to_string(i)});
    const std::vector<field> added = {{"via", "2 politeproxy"}, {"x-last", "yes"}};
    server.respond(id, 200, fields, true, added);
    pump(c, server);

    CHECK(c.status[id] == "200");
    const auto& got = c.fields[id];
    REQUIRE(got.size() == 42);
    for (int i = 0; i < 40; ++i) CHECK(got[i] == std::pair(fields[i].name, fields[i].value));
    CHECK(got[40].first == "via");
    CHECK(got[41] == std::pair<std::string, std::string>("x-last", "yes"));
}

TEST_CASE("a request body arrives in order; the client may send more only as it is consumed") {
    recorder heard;
    server_session server(heard, {}, t0);
    client c;
    const std::string big(200000, 'x');
    struct source {
        const std::string* data;
        std::size_t sent = 0;
    } src{&big};
    nghttp2_data_provider prd{};
    prd.source.ptr = &src;
    prd.read_callback = [](nghttp2_session*, std::int32_t, std::uint8_t* buf, std::size_t len, std::uint32_t* flags,
                           nghttp2_data_source* s, void*) -> ssize_t {
        auto* me = static_cast<source*>(s->ptr);
        const std::size_t n = std::min(len, me->data->size() - me->sent);
        std::memcpy(buf, me->data->data() + me->sent, n);
        me->sent += n;
        if (me->sent == me->data->size()) *flags |= NGHTTP2_DATA_FLAG_EOF;
        return static_cast<ssize_t>(n);
    };
    std::string m = ":method", mv = "POST", sc = ":scheme", scv = "https", au = ":authority", auv = "up.test",
                p = ":path", pv = "/upload";
    nghttp2_nv nva[] = {
        {reinterpret_cast<std::uint8_t*>(m.data()), reinterpret_cast<std::uint8_t*>(mv.data()), m.size(), mv.size(), 0},
        {reinterpret_cast<std::uint8_t*>(sc.data()), reinterpret_cast<std::uint8_t*>(scv.data()), sc.size(), scv.size(), 0},
        {reinterpret_cast<std::uint8_t*>(au.data()), reinterpret_cast<std::uint8_t*>(auv.data()), au.size(), auv.size(), 0},
        {reinterpret_cast<std::uint8_t*>(p.data()), reinterpret_cast<std::uint8_t*>(pv.data()), p.size(), pv.size(), 0},
    };
    const auto id = nghttp2_submit_request(c.session, nullptr, nva, 4, &prd, nullptr);
    pump(c, server);
    REQUIRE(heard.requests.size() == 1);
    CHECK_FALSE(heard.requests[0].end_stream);
    // Nothing consumed: the client stops at its initial window (65,535 bytes).
    CHECK(heard.bodies[id].size() == 65535);
    CHECK(heard.ended.empty());
    std::size_t forwarded = 0;
    while (heard.bodies[id].size() < big.size()) {
        const std::size_t before = heard.bodies[id].size();
        server.consumed(id, before - forwarded);  // what the proxy passed on since
        forwarded = before;
        pump(c, server);
        REQUIRE(heard.bodies[id].size() > before);
    }
    CHECK(heard.bodies[id] == big);
    CHECK(heard.ended == std::vector<std::int32_t>{id});
}

TEST_CASE("a reset stream is closed on both sides; a bad preface ends the connection with GOAWAY") {
    recorder heard;
    server_session server(heard, {}, t0);
    client c;
    const auto id = c.get("r.test", "/");
    pump(c, server);
    REQUIRE(heard.requests.size() == 1);
    nghttp2_submit_rst_stream(c.session, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
    pump(c, server);
    REQUIRE(heard.closed.count(id) == 1);
    CHECK(heard.closed[id] == NGHTTP2_CANCEL);
    server.respond(id, 200, {}, true);  // too late: nothing is sent for a closed stream
    pump(c, server);
    CHECK(c.status.count(id) == 0);

    recorder other;
    server_session bad(other, {}, t0);
    CHECK_FALSE(bad.receive(bytes_of("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), t0));
    std::string out;
    bad.produce(out);
    CHECK(out.find('\x07') != std::string::npos);  // a GOAWAY frame (type 7) went out
    CHECK(other.requests.empty());
}

TEST_CASE("a header block past max_header_bytes resets its stream, the connection goes on") {
    recorder heard;
    server_session server(heard, {.max_header_bytes = 1024}, t0);
    client c;
    const auto big = c.get("h.test", "/", {{"x-big", std::string(2000, 'a')}});
    const auto small = c.get("h.test", "/ok");
    pump(c, server);
    REQUIRE(heard.requests.size() == 1);
    CHECK(heard.requests[0].stream == small);
    CHECK(c.closed.count(big) == 1);
    CHECK(c.closed[big] != NGHTTP2_NO_ERROR);
}

TEST_CASE("rapid reset: resets past the bucket end the connection with ENHANCE_YOUR_CALM; a steady rate does not") {
    const server_session::settings guard{.resets_per_second = 100, .reset_burst = 200};
    {
        recorder heard;
        server_session server(heard, guard, t0);
        client c;
        pump(c, server);
        for (int i = 0; i < 500; ++i) {  // 50 a second for 10 seconds: under the rate, past the burst
            const auto id = c.get("calm.test", "/");
            pump(c, server, t0 + i * 20ms);  // HEADERS sent: a stream to reset
            nghttp2_submit_rst_stream(c.session, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
            pump(c, server, t0 + i * 20ms);
        }
        CHECK(heard.closed.size() == 500);  // every reset arrived
        CHECK_FALSE(server.calmed());
        CHECK_FALSE(c.goaway);
        const auto after = c.get("calm.test", "/after");
        pump(c, server, t0 + 10s);
        CHECK(heard.requests.back().stream == after);
    }
    recorder heard;
    server_session server(heard, guard, t0);
    client c;
    pump(c, server);
    // The attack at one instant: rounds of 50 streams opened and reset at once (the
    // client keeps under the advertised 100 streams), until the server has had enough.
    bool cut = false;
    int resets = 0;
    for (int round = 0; round < 10 && !cut; ++round) {
        std::vector<std::int32_t> ids;
        for (int i = 0; i < 50; ++i) ids.push_back(c.get("flood.test", "/"));
        REQUIRE(server.receive(bytes_of(c.produce()), t0));  // opened...
        for (auto id : ids) nghttp2_submit_rst_stream(c.session, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
        resets += 50;
        cut = !server.receive(bytes_of(c.produce()), t0);  // ...and reset at once
        std::string out;
        server.produce(out);
        REQUIRE(nghttp2_session_mem_recv(c.session, bytes_of(out).data(), out.size()) >= 0);
    }
    CHECK(cut);
    CHECK(resets == 250);  // the burst (200) and then some: the round that crossed it
    CHECK(server.calmed());
    CHECK(c.goaway);
    CHECK(c.goaway_error == NGHTTP2_ENHANCE_YOUR_CALM);
}

TEST_CASE("a CONTINUATION flood (CVE-2024-28182) ends the connection before any request is reported") {
    recorder heard;
    server_session server(heard, {}, t0);
    std::string wire = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    const auto frame = [&wire](std::uint8_t type, std::uint8_t flags, std::uint32_t stream, std::string payload) {
        const auto n = payload.size();
        wire += {static_cast<char>(n >> 16), static_cast<char>(n >> 8), static_cast<char>(n),
                 static_cast<char>(type), static_cast<char>(flags), static_cast<char>(stream >> 24),
                 static_cast<char>(stream >> 16), static_cast<char>(stream >> 8), static_cast<char>(stream)};
        wire += payload;
    };
    frame(0x4, 0, 0, "");            // SETTINGS, empty
    frame(0x1, 0, 1, "\x82\x87");    // HEADERS without END_HEADERS: :method GET, :scheme https
    for (int i = 0; i < 10000; ++i)  // CONTINUATION, empty, never END_HEADERS
        frame(0x9, 0, 1, "");
    // Debian's nghttp2 1.52 carries the fix (NGHTTP2_ERR_TOO_MANY_CONTINUATIONS): a fatal
    // error, so nothing more is sent; the owner closes at once.
    CHECK_FALSE(server.receive(bytes_of(wire), t0));
    CHECK(heard.requests.empty());
}
