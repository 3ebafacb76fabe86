#include "politeproxy/http1/origin_response.hpp"

#include "politeproxy/http1/hop_by_hop.hpp"

#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/rfc7230.hpp>
#include <boost/beast/http/status.hpp>

#include <algorithm>
#include <cstring>

namespace politeproxy {
namespace beast = boost::beast;
namespace http = beast::http;

namespace {

constexpr std::string_view crlf = "\r\n";

}  // namespace

origin_response_parser::origin_response_parser(wire_allocator arena)
    : reason_(arena), fields_(arena), keep_alive_(arena), connection_(arena) {
    // The body is not read through this parser, whatever its length: Beast's default
    // limit (8 MiB) would refuse a larger Content-Length as the header completes.
    body_limit(boost::none);
}

std::string_view origin_response_parser::retry_after() const {
    if (!has_retry_after_) return {};
    return std::string_view(fields_).substr(retry_after_at_, retry_after_size_);
}

void origin_response_parser::on_response_impl(int code, beast::string_view reason, int version, beast::error_code&) {
    status_ = static_cast<unsigned>(code);
    version_ = static_cast<unsigned>(version);
    reason_.assign(reason.data(), reason.size());
}

void origin_response_parser::on_field_impl(http::field name, beast::string_view name_string, beast::string_view value,
                                           beast::error_code&) {
    if (name == http::field::connection) {
        if (!connection_.empty()) connection_ += ',';
        connection_.append(value.data(), value.size());
        return;
    }
    if (name == http::field::keep_alive && keep_alive_.empty()) keep_alive_.assign(value.data(), value.size());
    if (always_hop_by_hop(name)) return;
    if (name == http::field::transfer_encoding) return framing_fields_.transfer_encoding(value);
    if (name == http::field::content_length) return framing_fields_.content_length(value);
    fields_.append(name_string.data(), name_string.size());
    fields_ += ": ";
    if (name == http::field::retry_after && !has_retry_after_) {
        has_retry_after_ = true;
        retry_after_at_ = fields_.size();
        retry_after_size_ = value.size();
    }
    fields_.append(value.data(), value.size());
    fields_ += crlf;
}

void origin_response_parser::on_header_impl(beast::error_code& ec) {
    if (const auto fault = framing_fields_.response(version_, framing_); fault != framing_fault::none) {
        ec = fault == framing_fault::bad_content_length ? http::error::bad_content_length
                                                        : http::error::bad_transfer_encoding;
        return;
    }
    if (connection_.empty()) return;
    // The names Connection lists beyond the fixed set ("close" and "keep-alive" name
    // no forwarded field): usually none.
    std::pmr::vector<std::string_view> named(fields_.get_allocator());
    for (auto token : http::token_list{connection_})
        if (removed_when_listed(http::string_to_field(token))) named.push_back(token);
    if (named.empty()) return;
    remove_fields([&](std::string_view field_name) {
        return std::any_of(named.begin(), named.end(), [&](std::string_view n) { return beast::iequals(n, field_name); });
    });
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
        if (beast::iequals(name, "Retry-After") && !has_retry_after_) {
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
