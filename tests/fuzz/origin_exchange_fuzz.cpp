// Two requests on one HTTP/1.1 origin connection, read sans-io as h1_origin_transport reads
// them: the response header (origin_response_parser under the proxy's limit), interim
// responses skipped and any other 1xx refused (forwarding::is_interim), the plan for an
// HTTP/1.1 client (plan_response), then the body as plan.from_origin says (a length, the
// chunked_decoder, or until the close). The connection is pooled as h1_origin_transport and
// origin_pool::put decide: the origin keeps it alive, the body does not end at the close,
// and nothing it sent is left, neither in the read buffer nor unread on the socket.
//
// Input: the first byte's low bit picks request 1's method (0: HEAD, as 'H'; 1: GET, as
// 'G'); the rest is everything the origin sent for request 1. Invariants: a fuzzed answer
// never changes the answer request 2 gets (pooled, the connection then carries a fixed
// tagged response, which must come out whole, with nothing left behind); a byte after the
// end of response 1, as the proxy framed it, keeps the connection out of the pool; the
// same answer and pooling decision whether the bytes arrive in one read or two.
#include "fuzz_input.hpp"

#include "politeproxy/config/config.hpp"
#include "politeproxy/http1/chunked_decoder.hpp"
#include "politeproxy/exchange/h1_origin_transport.hpp"
#include "politeproxy/http1/framing.hpp"
#include "politeproxy/http1/origin_response.hpp"
#include "politeproxy/http1/relay.hpp"

#include <boost/asio/buffer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/error.hpp>

#include <algorithm>
#include <cstring>
#include <memory_resource>
#include <optional>
#include <span>
#include <string>
#include <vector>

using namespace politeproxy;
namespace http = boost::beast::http;

namespace {

/// Request 2's answer, as the origin sends it once request 2 is written.
constexpr std::string_view second_answer = "HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nTAG-REQ2";
constexpr std::string_view second_body = "TAG-REQ2";

/// One origin connection from the proxy's side: what the origin sent, delivered one read
/// at a time when the proxy reads, and the proxy's read buffer (scratch.from_origin).
class origin_wire {
public:
    void send(std::string_view bytes) {
        if (!bytes.empty()) sent_.push_back(bytes);
    }
    /// async_read_some: the next read into the buffer; false when nothing more comes
    /// (the origin closed, or is silent until the proxy's timeout).
    bool read() {
        if (next_ == sent_.size()) return false;
        const std::string_view bytes = sent_[next_++];
        buffer.commit(boost::asio::buffer_copy(buffer.prepare(bytes.size()), boost::asio::buffer(bytes)));
        return true;
    }
    std::string_view buffered() const {
        const auto data = buffer.data();
        return {static_cast<const char*>(data.data()), data.size()};
    }
    void consume(std::size_t n) {
        buffer.consume(n);
        consumed_ += n;
    }
    /// Something sent and not yet read: what the reuse check (timed_socket::watch) finds.
    bool unread() const { return next_ < sent_.size(); }
    /// The bytes of the connection the proxy has taken as messages so far.
    std::size_t consumed() const { return consumed_; }

    boost::beast::flat_buffer buffer;

private:
    std::vector<std::string_view> sent_;
    std::size_t next_ = 0;
    std::size_t consumed_ = 0;
};

/// read_header's loop, on the wire: put what is buffered, read more while it needs more.
boost::system::error_code read_header(origin_wire& wire, origin_response_parser& parser) {
    boost::system::error_code ec;
    for (;;) {
        if (wire.buffer.size() > 0) {
            wire.consume(parser.put(wire.buffer.data(), ec));
            if (ec == http::error::need_more)
                ec = {};
            else if (ec || parser.is_header_done())
                return ec;
        }
        if (!wire.read()) {
            if (!parser.got_some()) return http::error::end_of_stream;
            parser.put_eof(ec);
            return ec ? ec : http::error::partial_message;
        }
    }
}

enum class ending : std::uint8_t {
    relayed,      ///< the response went to the client whole
    bad_status,   ///< a 1xx not relayed past (101 among them): 502, the connection closed
    unreadable,   ///< no header (malformed, too large, too many interim ones, cut short): 502
    body_failed,  ///< the body broke off or its chunked coding is broken: the client's connection closed
};

struct origin_answer {
    ending end = ending::unreadable;
    unsigned status = 0;
    std::string body;
    std::size_t framed = 0;  ///< the connection's bytes up to the response's end, interim ones included
    bool pooled = false;

    bool operator==(const origin_answer&) const = default;
};

/// The body as `from_origin` says; false when it does not end.
bool read_body(origin_wire& wire, body_framing from_origin, std::string& body) {
    switch (from_origin.kind) {
    case body_kind::none: return true;
    case body_kind::length: {
        std::uint64_t remaining = from_origin.length;
        for (;;) {
            const std::string_view buffered = wire.buffered();
            const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(buffered.size(), remaining));
            body.append(buffered.substr(0, n));
            wire.consume(n);
            remaining -= n;
            if (remaining == 0) return true;
            if (!wire.read()) return false;  // the body cut short
        }
    }
    case body_kind::chunked: {
        chunked_decoder decoder;
        std::vector<char> room(relay_buffers::chunk_size);
        for (;;) {
            while (wire.buffer.size() > 0 && !decoder.done() && !decoder.failed()) {
                const auto r = decoder.decode(wire.buffered(), room);
                wire.consume(r.consumed);
                body.append(room.data(), r.written);
            }
            if (decoder.failed()) return false;
            if (decoder.done()) return true;
            if (!wire.read()) return false;  // the body cut short
        }
    }
    case body_kind::until_close:
        for (;;) {
            body.append(wire.buffered());
            wire.consume(wire.buffer.size());
            if (!wire.read()) return true;  // the close is this body's end
        }
    }
    return false;
}

/// One response on the wire, as h1_origin_transport reads it for a request of `head` or
/// not, from an HTTP/1.1 client.
origin_answer read_response(origin_wire& wire, bool head, std::pmr::memory_resource& arena) {
    origin_answer a;
    std::optional<origin_response_parser> response;
    boost::system::error_code ec;
    int interim = 0;
    do {
        if (++interim > forwarding::max_interim_responses) {
            ec = http::error::bad_status;
            break;
        }
        response.emplace(wire_allocator{&arena});
        response->header_limit(limits_config{}.response_header_bytes);
        ec = read_header(wire, *response);
    } while (!ec && forwarding::is_interim(response->status()));
    if (!ec && response->status() < 200) {
        a.end = ending::bad_status;
        a.status = response->status();
        return a;
    }
    if (ec) return a;
    a.status = response->status();
    const auto plan = plan_response(response->framing(), a.status, head, 11);
    const bool origin_keeps = response->keep_alive() && plan.from_origin.kind != body_kind::until_close;
    if (!read_body(wire, plan.from_origin, a.body)) {
        a.end = ending::body_failed;
        return a;
    }
    a.end = ending::relayed;
    a.framed = wire.consumed();
    a.pooled = origin_keeps && wire.buffer.size() == 0 && !wire.unread();
    return a;
}

/// Request 1's answer from `origin_sent` arriving in `reads`; then, when the connection
/// is pooled, request 2's on it.
origin_answer two_requests(std::span<const std::string_view> reads, bool head, std::size_t origin_sent) {
    std::pmr::monotonic_buffer_resource arena;
    origin_wire wire;
    for (const std::string_view r : reads) wire.send(r);
    const origin_answer first = read_response(wire, head, arena);
    fuzz::require(first.end != ending::relayed || first.framed == origin_sent || !first.pooled,
                  "pooled with bytes after the response's end");
    if (!first.pooled) return first;
    // Request 2 is written; its answer comes next, read from where request 1 left the
    // buffer (h1_origin_transport clears it; pooled, there is nothing to clear).
    wire.send(second_answer);
    const origin_answer second = read_response(wire, false, arena);
    fuzz::require(second.end == ending::relayed, "request 2 got no answer of its own");
    fuzz::require(second.status == 200, "request 2 got another status");
    fuzz::require(second.body == second_body, "request 2 got another body");
    fuzz::require(wire.buffer.size() == 0 && !wire.unread(), "bytes left behind request 2's answer");
    fuzz::require(second.pooled, "request 2's answer did not leave the connection reusable");
    return first;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    const bool head = (data[0] & 1) == 0;
    const std::string_view sent = fuzz::text(data + 1, size - 1);
    const std::string_view one_read[] = {sent};
    const origin_answer whole = two_requests(one_read, head, sent.size());
    const std::string_view two_reads[] = {sent.substr(0, sent.size() / 2), sent.substr(sent.size() / 2)};
    const origin_answer split = two_requests(two_reads, head, sent.size());
    fuzz::require(split.pooled == whole.pooled, "fed in two reads, another pooling decision");
    fuzz::require(split == whole, "fed in two reads, another answer");
    return 0;
}
