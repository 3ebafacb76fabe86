#include "politeproxy/http1/origin_response.hpp"

#include "politeproxy/base/char_class.hpp"
#include "politeproxy/http1/hop_by_hop.hpp"

#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/field.hpp>
#include <boost/beast/http/rfc7230.hpp>
#include <boost/beast/http/status.hpp>

#include <algorithm>
#include <cstring>

namespace politeproxy {
namespace beast = boost::beast;
namespace http = beast::http;

namespace {

constexpr std::string_view crlf = "\r\n";

/// What a field name means to the parser; most are `other`, forwarded as they came.
enum class field_role { other, connection, keep_alive, hop_by_hop, transfer_encoding, content_length, retry_after };

/// `name` (tchars only) is `lower` (lower case letters, digits and '-') in any case. Setting
/// bit 0x20 lowers a letter and changes none of the others `lower` holds; of the tchars,
/// only a letter's other case becomes a letter that way.
bool same_name(std::string_view name, std::string_view lower) {
    for (std::size_t i = 0; i < lower.size(); ++i)
        if ((static_cast<unsigned char>(name[i]) | 0x20) != static_cast<unsigned char>(lower[i])) return false;
    return true;
}

field_role role_of(std::string_view name) {
    // By length first: most names are compared with none of these.
    const auto is = [&](std::string_view known) { return same_name(name, known); };
    switch (name.size()) {
    case 2: return is("te") ? field_role::hop_by_hop : field_role::other;
    case 7: return is("upgrade") ? field_role::hop_by_hop : field_role::other;
    case 10: return is("connection") ? field_role::connection : is("keep-alive") ? field_role::keep_alive : field_role::other;
    case 11: return is("retry-after") ? field_role::retry_after : field_role::other;
    case 14: return is("content-length") ? field_role::content_length : field_role::other;
    case 16: return is("proxy-connection") ? field_role::hop_by_hop : field_role::other;
    case 17: return is("transfer-encoding") ? field_role::transfer_encoding : field_role::other;
    case 18: return is("proxy-authenticate") ? field_role::hop_by_hop : field_role::other;
    case 19: return is("proxy-authorization") ? field_role::hop_by_hop : field_role::other;
    default: return field_role::other;
    }
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

}  // namespace

origin_response_parser::origin_response_parser(wire_allocator arena)
    : reason_(arena), fields_(arena), keep_alive_hint_(arena), connection_(arena) {}

std::size_t origin_response_parser::put(boost::asio::const_buffer bytes, boost::system::error_code& ec) {
    ec = {};
    if (done_) return 0;
    const std::string_view in(static_cast<const char*>(bytes.data()), bytes.size());
    if (!in.empty()) got_some_ = true;
    // Not an HTTP/1 response from its first bytes: no need to wait for a line end.
    constexpr std::string_view version_prefix = "HTTP/1.";
    if (parsed_ == 0 && version_prefix.substr(0, std::min(in.size(), version_prefix.size())) !=
                            in.substr(0, version_prefix.size())) {
        ec = http::error::bad_version;
        return 0;
    }
    // Each whole line not yet checked, up to the empty one that ends the header.
    while (parsed_ < in.size()) {
        const std::size_t lf = in.find('\n', parsed_);
        if (lf == std::string_view::npos || lf >= limit_) break;
        if (lf == parsed_ || in[lf - 1] != '\r') {
            ec = http::error::bad_line_ending;  // a bare LF
            return 0;
        }
        const std::size_t from = parsed_;
        const std::string_view line = in.substr(from, lf - 1 - from);
        parsed_ = lf + 1;
        if (from == 0) {
            status_line(line, ec);
        } else if (line.empty()) {
            flush_run(in);
            header_done(ec);
        } else {
            field_line(in, from, lf - 1, ec);
        }
        if (ec) return 0;
        if (done_) return parsed_;
    }
    flush_run(in);  // lines copied so far; the next call starts a new run
    // The header's end is not in sight: within the limit, it may still come.
    ec = in.size() >= limit_ ? http::error::header_limit : http::error::need_more;
    return 0;
}

void origin_response_parser::put_eof(boost::system::error_code& ec) {
    ec = done_ ? boost::system::error_code() : http::error::partial_message;
}

void origin_response_parser::status_line(std::string_view line, boost::system::error_code& ec) {
    // "HTTP/1.x SP 3DIGIT SP reason"; the prefix "HTTP/1." was checked as it arrived.
    if (line.size() < 12 || !is_digit(line[7]) || line[8] != ' ') {
        ec = http::error::bad_version;
        return;
    }
    version_ = line[7] == '0' ? 10 : 11;  // a later 1.x is read as 1.1 (RFC 9110 section 2.5)
    if (!is_digit(line[9]) || !is_digit(line[10]) || !is_digit(line[11]) || line[9] == '0' ||
        (line.size() > 12 && line[12] != ' ')) {
        ec = http::error::bad_status;
        return;
    }
    status_ = static_cast<unsigned>((line[9] - '0') * 100 + (line[10] - '0') * 10 + (line[11] - '0'));
    const std::string_view reason = line.size() > 13 ? line.substr(13) : std::string_view();
    if (!all_field_value_bytes(reason)) {
        ec = http::error::bad_reason;
        return;
    }
    reason_.assign(reason);
}

void origin_response_parser::field_line(std::string_view in, std::size_t from, std::size_t to,
                                        boost::system::error_code& ec) {
    // field-name ":" OWS field-value OWS; no whitespace before the colon, none starting
    // the line (obs-fold, or a field name led by whitespace).
    const std::string_view line = in.substr(from, to - from);
    // The line's CR (in[to], checked by put) ends the scan if no colon does.
    std::size_t colon = 0;
    while (is_tchar(static_cast<unsigned char>(line.data()[colon]))) ++colon;
    if (colon == 0 || colon == line.size() || line[colon] != ':') {
        ec = http::error::bad_field;
        return;
    }
    const std::string_view name = line.substr(0, colon);
    std::string_view value = line.substr(colon + 1);
    if (!all_field_value_bytes(value)) {
        ec = http::error::bad_value;
        return;
    }
    while (!value.empty() && is_ows(static_cast<unsigned char>(value.front()))) value.remove_prefix(1);
    while (!value.empty() && is_ows(static_cast<unsigned char>(value.back()))) value.remove_suffix(1);

    const field_role role = role_of(name);
    switch (role) {
    case field_role::connection:
        if (!connection_.empty()) connection_ += ',';
        connection_ += value;
        return;
    case field_role::keep_alive:
        if (keep_alive_hint_.empty()) keep_alive_hint_.assign(value);
        return;
    case field_role::hop_by_hop: return;
    case field_role::transfer_encoding: return framing_fields_.transfer_encoding(value);
    case field_role::content_length: return framing_fields_.content_length(value);
    case field_role::retry_after:
    case field_role::other: break;
    }
    // Forwarded. A line already in the form it is written in ("Name: value", one space
    // after the colon, none at the end: nearly every line) joins the run of such lines
    // copied at once; another is written out from its parts.
    const std::size_t value_at = colon + 2;
    const bool as_written = value_at <= line.size() && line[colon + 1] == ' ' && value.data() == line.data() + value_at &&
                            value.data() + value.size() == line.data() + line.size();
    if (!as_written || from != run_to_) flush_run(in);
    if (as_written && run_from_ == run_to_) run_from_ = from;
    if (role == field_role::retry_after && !has_retry_after_) {
        has_retry_after_ = true;
        retry_after_at_ = fields_.size() + (as_written ? from - run_from_ : 0) + value_at;
        retry_after_size_ = value.size();
    }
    if (as_written) {
        run_to_ = to + crlf.size();
        return;
    }
    fields_ += name;
    fields_ += ": ";
    fields_ += value;
    fields_ += crlf;
}

void origin_response_parser::flush_run(std::string_view in) {
    fields_ += in.substr(run_from_, run_to_ - run_from_);
    run_from_ = run_to_ = 0;
}

void origin_response_parser::header_done(boost::system::error_code& ec) {
    if (const auto fault = framing_fields_.response(version_, framing_); fault != framing_fault::none) {
        ec = fault == framing_fault::bad_content_length ? http::error::bad_content_length
                                                        : http::error::bad_transfer_encoding;
        return;
    }
    done_ = true;
    // HTTP/1.1 keeps the connection unless it says close; HTTP/1.0 only when it says
    // keep-alive (RFC 9112 section 9.3).
    bool close = false, keep = false;
    std::pmr::vector<std::string_view> named(fields_.get_allocator());
    for (auto token : http::token_list{connection_}) {
        if (beast::iequals(token, "close"))
            close = true;
        else if (beast::iequals(token, "keep-alive"))
            keep = true;
        else if (removed_when_listed(http::string_to_field(token)))
            named.push_back(token);  // a forwarded field this connection's hop claims: usually none
    }
    keep_alive_ = !close && (version_ >= 11 || keep);
    if (named.empty()) return;
    remove_fields([&](std::string_view field_name) {
        return std::any_of(named.begin(), named.end(), [&](std::string_view n) { return beast::iequals(n, field_name); });
    });
}

std::string_view origin_response_parser::retry_after() const {
    if (!has_retry_after_) return {};
    return std::string_view(fields_).substr(retry_after_at_, retry_after_size_);
}

std::string_view origin_response_parser::field(std::string_view lower_name) const {
    if (lower_name == "retry-after") return retry_after();
    for (std::string_view rest = fields_; !rest.empty();) {
        const std::size_t end = rest.find(crlf);  // every line kept ends with CRLF; a last one without, whole
        const std::string_view line = rest.substr(0, end);
        rest.remove_prefix(end == std::string_view::npos ? rest.size() : end + crlf.size());
        const std::size_t colon = line.find(':');
        if (!beast::iequals(line.substr(0, colon), lower_name)) continue;
        std::string_view value = line.substr(colon + 1);
        while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
        while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
        return value;
    }
    return {};
}

template <class Pred>
void origin_response_parser::remove_fields(Pred doomed) {
    std::pmr::string kept(fields_.get_allocator());
    std::string_view rest = fields_;
    has_retry_after_ = false;
    while (!rest.empty()) {
        const std::size_t end = rest.find(crlf) + crlf.size();
        const std::string_view line = rest.substr(0, end);
        rest.remove_prefix(end);
        const std::string_view name = line.substr(0, line.find(':'));
        if (doomed(name)) continue;
        if (role_of(name) == field_role::retry_after && !has_retry_after_) {
            has_retry_after_ = true;
            retry_after_at_ = kept.size() + name.size() + 2;
            retry_after_size_ = line.size() - name.size() - 2 - crlf.size();
        }
        kept += line;
    }
    fields_ = std::move(kept);
}

void origin_response_parser::write_head(std::string_view added_fields, std::string& out) const {
    char status[4] = {static_cast<char>('0' + status_ / 100 % 10), static_cast<char>('0' + status_ / 10 % 10),
                      static_cast<char>('0' + status_ % 10), ' '};
    const std::string_view reason =
        reason_.empty() ? std::string_view(http::obsolete_reason(http::int_to_status(status_))) : std::string_view(reason_);
    out.reserve(out.size() + 13 + reason.size() + fields_.size() + added_fields.size() + 4);
    out += "HTTP/1.1 ";
    out.append(status, 4);
    out += reason;
    out += crlf;
    out += fields_;
    out += added_fields;
    out += crlf;
}

}  // namespace politeproxy
