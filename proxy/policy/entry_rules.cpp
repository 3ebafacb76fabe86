#include "politeproxy/policy/entry_rules.hpp"

#include <charconv>

namespace politeproxy {

entry_verdict judge_method(const entry_facts& head, std::size_t max_fields) {
    if (head.method == entry_method::trace) return refuse_entry(errc::method_not_allowed, "TRACE is not forwarded");
    if (head.method == entry_method::connect && !head.tunnels)
        return refuse_entry(errc::bad_request, "CONNECT opens no tunnel on this connection");
    entry_verdict v;
    if (head.method == entry_method::options) {
        v.answer_options = head.asterisk;
        if (head.max_forwards_fields > 1) return refuse_entry(errc::bad_request, "Max-Forwards twice");
        if (head.max_forwards_fields == 1) {
            const std::string_view value = head.max_forwards;
            long long n = 0;
            const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
            if (ec != std::errc{} || end != value.data() + value.size() || n < 0)
                return refuse_entry(errc::bad_request, "Max-Forwards is not a non-negative number");
            v.answer_options = v.answer_options || n == 0;
            v.max_forwards = n - 1;
        }
    }
    if (head.field_lines > max_fields)
        return refuse_entry(errc::header_too_large, "more header fields than limits.request_header_fields");
    return v;
}

}  // namespace politeproxy
