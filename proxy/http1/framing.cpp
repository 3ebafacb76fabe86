#include "politeproxy/http1/framing.hpp"

#include "politeproxy/base/char_class.hpp"

#include <array>
#include <charconv>
#include <limits>

namespace politeproxy {

namespace {

std::string_view trim_ows(std::string_view s) {
    while (!s.empty() && is_ows(s.front())) s.remove_prefix(1);
    while (!s.empty() && is_ows(s.back())) s.remove_suffix(1);
    return s;
}

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool equals_lower(std::string_view s, std::string_view lower_word) {
    if (s.size() != lower_word.size()) return false;
    for (std::size_t i = 0; i < s.size(); ++i)
        if (lower(s[i]) != lower_word[i]) return false;
    return true;
}

// Calls f(element) for each non-empty, OWS-trimmed element of a comma-separated list.
template <class F>
void for_each_element(std::string_view list, F f) {
    for (;;) {
        const std::size_t comma = list.find(',');
        if (const auto e = trim_ows(list.substr(0, comma)); !e.empty()) f(e);
        if (comma == std::string_view::npos) return;
        list.remove_prefix(comma + 1);
    }
}

}  // namespace

const char* describe(framing_fault f) {
    switch (f) {
    case framing_fault::none: return "framing is good";
    case framing_fault::bad_transfer_encoding:
        return "Transfer-Encoding must name chunked once, as the final coding";
    case framing_fault::unsupported_coding: return "only the chunked transfer coding is accepted on requests";
    case framing_fault::bad_content_length: return "Content-Length is not one decimal number below 2^63";
    case framing_fault::both_framing_fields: return "Transfer-Encoding together with Content-Length";
    case framing_fault::transfer_encoding_in_http10: return "Transfer-Encoding in an HTTP/1.0 message";
    }
    return "bad framing";
}

void framing_reader::transfer_encoding(std::string_view value) {
    has_te_ = true;
    for_each_element(value, [this](std::string_view coding) {
        for (char c : coding)
            if (!is_tchar(static_cast<unsigned char>(c))) te_bad_ = true;  // parameters, quotes, spaces
        if (equals_lower(coding, "chunked")) {
            ++chunked_;
            chunked_last_ = true;
            return;
        }
        chunked_last_ = false;
        if (!codings_.empty()) codings_ += ", ";
        for (char c : coding) codings_ += lower(c);
    });
}

void framing_reader::content_length(std::string_view value) {
    bool any = false;
    for_each_element(value, [this, &any](std::string_view digits) {
        any = true;
        std::uint64_t v = 0;
        const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
        // from_chars takes no sign or space, and reports overflow; leading zeros are digits.
        // Above 2^63-1 a length is negative to an origin that reads it as a signed number.
        if (ec != std::errc{} || end != digits.data() + digits.size() || v > max_content_length ||
            (has_cl_ && v != length_)) {
            cl_bad_ = true;
            return;
        }
        has_cl_ = true;
        length_ = v;
    });
    if (!any) cl_bad_ = true;
    has_cl_ = true;
}

framing_fault framing_reader::transfer_encoding_fault() const {
    if (te_bad_ || chunked_ > 1 || (chunked_ == 1 && !chunked_last_) || (chunked_ == 0 && codings_.empty()))
        return framing_fault::bad_transfer_encoding;
    return framing_fault::none;
}

framing_fault framing_reader::request(unsigned version, body_framing& out) const {
    out = {};
    if (has_te_) {
        if (version < 11) return framing_fault::transfer_encoding_in_http10;
        if (has_cl_) return framing_fault::both_framing_fields;
        if (const auto f = transfer_encoding_fault(); f != framing_fault::none) return f;
        if (!chunked_last_) return framing_fault::bad_transfer_encoding;  // the final coding must be chunked
        if (!codings_.empty()) return framing_fault::unsupported_coding;
        out.kind = body_kind::chunked;
        return framing_fault::none;
    }
    if (has_cl_) {
        if (cl_bad_) return framing_fault::bad_content_length;
        out = {body_kind::length, length_};
    }
    return framing_fault::none;
}

framing_fault framing_reader::response(unsigned version, body_framing& out) const {
    out = {body_kind::until_close, 0};
    if (has_te_) {
        if (version < 11) return framing_fault::transfer_encoding_in_http10;
        if (has_cl_) return framing_fault::both_framing_fields;
        if (const auto f = transfer_encoding_fault(); f != framing_fault::none) return f;
        if (chunked_last_) out.kind = body_kind::chunked;
        return framing_fault::none;
    }
    if (has_cl_) {
        if (cl_bad_) return framing_fault::bad_content_length;
        out = {body_kind::length, length_};
    }
    return framing_fault::none;
}

response_plan plan_response(body_framing declared, unsigned status, bool head_request, unsigned client_version) {
    response_plan plan;
    const bool bodiless = head_request || status < 200 || status == 204 || status == 304;
    const bool http10 = client_version < 11;
    if (!bodiless) plan.from_origin = declared;
    if (status < 200 || status == 204) return plan;  // no framing field at all
    plan.length = declared.length;
    switch (declared.kind) {
    case body_kind::length: plan.told = body_kind::length; break;
    case body_kind::chunked: plan.told = http10 ? body_kind::none : body_kind::chunked; break;
    case body_kind::until_close: plan.told = http10 || bodiless ? body_kind::none : body_kind::chunked; break;
    case body_kind::none: break;
    }
    plan.out_chunked = !bodiless && plan.told == body_kind::chunked;
    plan.ends_at_close = !bodiless && http10 && declared.kind != body_kind::length;
    return plan;
}

void append_framing(body_kind kind, std::uint64_t length, std::string_view codings, std::string& out) {
    if (kind == body_kind::length) {
        char digits[std::numeric_limits<std::uint64_t>::digits10 + 1];
        const auto [end, ec] = std::to_chars(digits, digits + sizeof digits, length);
        out += "Content-Length: ";
        out.append(digits, end);
        out += "\r\n";
    } else if (kind == body_kind::chunked) {
        out += "Transfer-Encoding: ";
        if (!codings.empty()) {
            out += codings;
            out += ", ";
        }
        out += "chunked\r\n";
    }
}

}  // namespace politeproxy
