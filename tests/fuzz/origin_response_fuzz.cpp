// An origin's response head as the proxy reads it (origin_response_parser under the
// proxy's limit), and the plan for sending it on. Invariants: the same verdict and head
// whether it arrives in one read or two; nothing consumed past the header; the head it
// forwards is one header section (no CR or LF outside line ends, no empty line before
// its end) without framing or hop-by-hop fields; an HTTP/1.0 client is never sent chunked.
#include "fuzz_input.hpp"

#include "politeproxy/http1/origin_response.hpp"

#include <boost/asio/buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>

#include <memory_resource>
#include <string>

using namespace politeproxy;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view input = fuzz::text(data, size);
    std::pmr::monotonic_buffer_resource arena;
    origin_response_parser p{wire_allocator{&arena}};
    p.header_limit(64 * 1024);
    boost::system::error_code ec;
    const std::size_t used = p.put(boost::asio::buffer(input.data(), input.size()), ec);
    // As read_header feeds it: what has arrived so far, in two reads. The same verdict,
    // the same head.
    origin_response_parser split{wire_allocator{&arena}};
    split.header_limit(64 * 1024);
    boost::system::error_code split_ec;
    std::size_t split_used = split.put(boost::asio::buffer(input.data(), input.size() / 2), split_ec);
    if (split_ec == boost::beast::http::error::need_more)
        split_used = split.put(boost::asio::buffer(input.data(), input.size()), split_ec);
    fuzz::require(split_ec == ec && split_used == used, "fed in two reads, another verdict");
    if (ec || !p.is_header_done()) return 0;
    fuzz::require(used <= 64 * 1024 && input.substr(0, used).ends_with("\r\n\r\n"), "consumed past the header");
    std::string head;
    p.write_head("Via: 1.1 fuzz\r\n", head);
    std::string split_head;
    split.write_head("Via: 1.1 fuzz\r\n", split_head);
    fuzz::require(head == split_head, "fed in two reads, another head");
    fuzz::require(head.ends_with("\r\n\r\n"), "head not ended by an empty line");
    fuzz::require(head.find("\r\n\r\n") == head.size() - 4, "an empty line inside the head");
    std::string_view rest = head;
    while (!rest.empty()) {
        const std::size_t end = rest.find("\r\n");
        const std::string_view line = rest.substr(0, end);
        for (char c : line) fuzz::require(c != '\r' && c != '\n' && c != '\0', "CR, LF or NUL inside a line");
        const std::string_view name = line.substr(0, line.find(':'));
        for (const char* gone : {"Transfer-Encoding", "Content-Length", "Connection", "Keep-Alive"})
            fuzz::require(!boost::beast::iequals(name, gone), "a framing or hop-by-hop field forwarded as it came");
        rest.remove_prefix(end + 2);
    }
    for (unsigned version : {10u, 11u}) {
        const auto plan = plan_response(p.framing(), p.status(), false, version);
        fuzz::require(!plan.out_chunked || version == 11, "chunked to an HTTP/1.0 client");
        fuzz::require(plan.from_origin.kind != body_kind::none || plan.told != body_kind::chunked || p.status() == 304,
                      "chunked told for a body that is not there");
    }
    return 0;
}
