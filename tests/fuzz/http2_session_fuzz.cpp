// HTTP/2 towards clients: any bytes after the client preface. The session answers every
// request it reports (a body, then the end), keeps producing frames, and never crashes;
// every request it reports has a method, and a path unless it is a CONNECT (nghttp2's
// checks); no stream is reported closed twice.
#include "fuzz_input.hpp"

#include "politeproxy/http2/server_session.hpp"

#include <set>
#include <string>

using namespace politeproxy;

namespace {

struct answering : http2::session_events {
    http2::server_session* session = nullptr;
    std::set<std::int32_t> closed;
    void on_request(http2::request_head head) override {
        fuzz::require(!head.method.empty(), "a request without :method");
        fuzz::require(head.method == "CONNECT" || !head.path.empty(), "a request without :path");
        const politeproxy::field f{"content-type", "text/plain"};
        session->respond(head.stream, 200, {&f, 1}, false);
        const std::string body = "ok";
        session->send_body(head.stream, {reinterpret_cast<const std::uint8_t*>(body.data()), body.size()}, true);
    }
    void on_body(std::int32_t stream, std::span<const std::uint8_t> data) override {
        session->consumed(stream, data.size());
    }
    void on_body_end(std::int32_t) override {}
    void on_stream_closed(std::int32_t stream, std::uint32_t) override {
        fuzz::require(closed.insert(stream).second, "a stream closed twice");
    }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    answering events;
    const clock::time_point now{};
    http2::server_session session(events, {.max_concurrent_streams = 100, .max_header_bytes = 4096}, now);
    events.session = &session;
    static const std::string preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    std::string out;
    // The preface first unless the input starts with it already (then bad prefaces too).
    if (size == 0 || data[0] != 'P')
        session.receive({reinterpret_cast<const std::uint8_t*>(preface.data()), preface.size()}, now);
    // In two pieces where the first byte says, so frames split across reads are covered.
    const std::size_t split = size == 0 ? 0 : data[0] % (size + 1);
    if (session.receive({data, split}, now)) session.receive({data + split, size - split}, now + std::chrono::seconds(1));
    session.produce(out);
    return 0;
}
