// A client's request head as the proxy reads it: Beast's parser under the proxy's
// limits, then check_request_head, then the target (absolute-form or CONNECT), then the
// body as framed (the strict chunked decoder). Invariants: a request the proxy accepts
// has one framing, a host key that is canonical, and an upstream Host written from it.
#include "fuzz_input.hpp"

#include "politeproxy/http1/chunked_decoder.hpp"
#include "politeproxy/policy/host_key.hpp"
#include "politeproxy/http1/origin_target.hpp"
#include "politeproxy/http1/request_head.hpp"

#include <boost/asio/buffer.hpp>

#include <array>
#include <memory_resource>
#include <variant>

using namespace politeproxy;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::string_view input = fuzz::text(data, size);
    std::pmr::monotonic_buffer_resource arena;
    request_header_parser p(std::piecewise_construct, std::make_tuple(), std::make_tuple(wire_allocator{&arena}));
    const limits_config limits;
    p.header_limit(static_cast<std::uint32_t>(limits.request_header_bytes));
    boost::system::error_code ec;
    // As read_header feeds it: what has arrived so far, in two reads.
    const std::size_t first = input.size() / 2;
    std::size_t used = p.put(boost::asio::buffer(input.data(), first), ec);
    if (ec == boost::beast::http::error::need_more) {
        ec = {};
        used = p.put(boost::asio::buffer(input.data(), input.size()), ec);
    }
    if (ec || !p.is_header_done()) return 0;
    const auto verdict = check_request_head(p.get(), limits);
    if (verdict.refusal) return 0;
    const std::string_view target = p.get().target();
    if (p.get().method() == boost::beast::http::verb::connect) {
        const auto c = parse_connect_target(target);
        if (const auto* t = std::get_if<connect_target>(&c)) {
            fuzz::require(t->port != 0, "CONNECT port 0 accepted");
            fuzz::require(host_key(t->key) == t->key, "CONNECT host key not canonical");
        }
        return 0;
    }
    const auto parsed = parse_origin_target(target, wire_allocator{&arena});
    if (const auto* t = std::get_if<origin_target>(&parsed)) {
        fuzz::require(host_key(t->key) == t->key, "host key not canonical");
        fuzz::require(t->path.starts_with('/'), "origin-form path without its slash");
        std::string host;
        t->append_host(host);
        for (char c : host) fuzz::require(c != '\r' && c != '\n' && c != ' ' && c != '@', "Host written with junk");
    }
    if (verdict.body.kind == body_kind::chunked) {
        chunked_decoder d;
        std::array<char, 64> room;
        std::string_view body = input.substr(used);
        while (!body.empty() && !d.done() && !d.failed()) {
            const auto r = d.decode(body, room);
            fuzz::require(r.consumed <= body.size() && r.written <= room.size(), "decoder overran");
            body.remove_prefix(r.consumed);
        }
    }
    return 0;
}
