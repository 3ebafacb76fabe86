#pragma once
// The rules every request meets at the entry, whatever protocol carried it: one
// function, so an HTTP/1.1 request and an HTTP/2 stream get the same checks in the same
// order. Each client protocol first checks its own framing (HTTP/1.1: the request line,
// Host, Content-Length and Transfer-Encoding; HTTP/2: nghttp2 holds the pseudo-header and
// connection-specific fields), then gives the facts here. After these rules the adapters
// judge the target (HTTP/2: its :scheme too) and its destination, where the deny list
// needs no DNS (server/entry_target.hpp), and only then the credentials: a refused request
// costs no password hash.
#include "politeproxy/base/error.hpp"

#include <cstddef>
#include <optional>
#include <string_view>

namespace politeproxy {

/// The methods the rules single out; every other method is `other`.
enum class entry_method { other, trace, connect, options };

/// `method` as the rules see it (for HTTP/2's :method; HTTP/1.1 maps its parsed verb).
inline entry_method entry_method_of(std::string_view method) {
    if (method == "TRACE") return entry_method::trace;
    if (method == "CONNECT") return entry_method::connect;
    if (method == "OPTIONS") return entry_method::options;
    return entry_method::other;
}

/// What the rules read from a request's head.
struct entry_facts {
    entry_method method = entry_method::other;
    std::size_t field_lines = 0;        ///< its fields as HTTP/1.1 lines (cookie crumbs as one; :authority as Host)
    unsigned max_forwards_fields = 0;   ///< how many Max-Forwards fields it has
    std::string_view max_forwards;      ///< the first one's value
    bool asterisk = false;              ///< its target is "*" (OPTIONS *, RFC 9112 section 3.2.4)
    bool tunnels = false;               ///< a CONNECT opens a tunnel on this protocol (HTTP/1.1)
};

/// What they decided.
struct entry_verdict {
    std::optional<errc> refusal;  ///< set: answer it (static text in `details`)
    const char* details = "";
    /// OPTIONS with Max-Forwards: 0 (RFC 9110 section 7.6.2), or OPTIONS *, is answered by
    /// the proxy itself.
    bool answer_options = false;
    /// OPTIONS with Max-Forwards above 0: the value to forward (one less); -1 when absent.
    long long max_forwards = -1;
};

/// A refusal, for `why` (static text in `details`).
inline entry_verdict refuse_entry(errc why, const char* details) {
    entry_verdict v;
    v.refusal = why;
    v.details = details;
    return v;
}

/// The method's rules (TRACE is not forwarded, 405; CONNECT where it cannot tunnel, 400;
/// Max-Forwards on OPTIONS: twice, or not a number, 400), then the field count.
entry_verdict judge_method(const entry_facts& head, std::size_t max_fields);

/// In this order: the method's rules (judge_method), the field count against
/// limits.request_header_fields (`max_fields`, 431). Inline: most requests are neither
/// TRACE, CONNECT nor OPTIONS, and pay one comparison here.
inline entry_verdict judge_entry(const entry_facts& head, std::size_t max_fields) {
    if (head.method != entry_method::other) return judge_method(head, max_fields);
    if (head.field_lines > max_fields)
        return refuse_entry(errc::header_too_large, "more header fields than limits.request_header_fields");
    return {};
}

}  // namespace politeproxy
