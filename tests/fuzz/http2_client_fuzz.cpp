// HTTP/2 towards origins: any bytes from the origin, after the proxy opened three streams
// (one with a body still going out). The session never crashes and keeps producing
// frames; every response it reports is on a stream the proxy opened, once, with a final
// status (200-999); no stream is reported closed twice or reported after it closed.
#include "fuzz_input.hpp"

#include "politeproxy/http2/client_session.hpp"

#include <set>
#include <string>

using namespace politeproxy;

namespace {

struct recording : http2::origin_events {
    http2::client_session* session = nullptr;
    std::set<std::int32_t> opened, answered, closed;
    void on_response(std::int32_t stream, response_head head) override {
        fuzz::require(opened.count(stream) == 1, "a response on a stream the proxy did not open");
        fuzz::require(closed.count(stream) == 0, "a response after the stream closed");
        fuzz::require(answered.insert(stream).second, "two final responses on one stream");
        fuzz::require(head.status >= 200 && head.status <= 999, "a final response with an interim or no status");
    }
    void on_body(std::int32_t stream, std::span<const std::uint8_t> data) override {
        fuzz::require(answered.count(stream) == 1, "body bytes before the response header");
        session->consumed(stream, data.size());
    }
    void on_body_end(std::int32_t) override {}
    void on_stream_closed(std::int32_t stream, std::uint32_t) override {
        fuzz::require(opened.count(stream) == 1, "a stream closed that the proxy did not open");
        fuzz::require(closed.insert(stream).second, "a stream closed twice");
    }
    void on_settings(std::optional<std::uint32_t>) override {}
    void on_goaway(std::int32_t, std::uint32_t) override {}
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    recording events;
    http2::client_session session(events, {.max_header_bytes = 4096});
    events.session = &session;
    const std::vector<politeproxy::field> fields{{"accept", "*/*"}};
    for (const char* path : {"/1", "/2"})
        events.opened.insert(session.request("GET", "https", "origin.test", path, fields, true));
    const std::int32_t upload = session.request("POST", "https", "origin.test", "/up", fields, false);
    events.opened.insert(upload);
    const std::string part(1000, 'u');
    session.send_body(upload, {reinterpret_cast<const std::uint8_t*>(part.data()), part.size()}, false);
    std::string out;
    session.produce(out);
    // In two pieces where the first byte says, so frames split across reads are covered.
    const std::size_t split = size == 0 ? 0 : data[0] % (size + 1);
    if (session.receive({data, split})) {
        session.send_body(upload, {reinterpret_cast<const std::uint8_t*>(part.data()), part.size()}, true);
        session.produce(out);
        session.receive({data + split, size - split});
    }
    session.produce(out);
    return 0;
}
