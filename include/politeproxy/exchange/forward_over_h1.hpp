#pragma once
// The HTTP/1.1 origin half of forward_to_origin (exchange/forward_to_origin.hpp) for a
// client that gives its request as a message and takes the response as one (an HTTP/2
// stream; exchange/client_side.hpp): the request head written from the message's fields
// and the framing decided for its body, the body sent as the origin's framing wants it,
// and the response read as the origin framed it and handed back as a message.
// Connections, reuse, interim responses and every report stay in forward_to_origin; an
// HTTP/1.1 client relays its bytes itself (relays_http1). Included by
// forward_to_origin.hpp only.
#include "politeproxy/base/char_class.hpp"
#include "politeproxy/base/field.hpp"
#include "politeproxy/base/response_head.hpp"
#include "politeproxy/exchange/client_side.hpp"
#include "politeproxy/exchange/exchange.hpp"
#include "politeproxy/http1/body_reader.hpp"
#include "politeproxy/http1/framing.hpp"
#include "politeproxy/http1/origin_response.hpp"
#include "politeproxy/http1/origin_target.hpp"
#include "politeproxy/http1/relay.hpp"
#include "politeproxy/net/send_all.hpp"
#include "politeproxy/net/timed_socket.hpp"

#include <boost/asio/error.hpp>

#include <algorithm>
#include <span>
#include <string>
#include <string_view>

namespace politeproxy::over_h1 {

/// The origin's request head, into scratch.head: the start line, Host, the message's
/// fields (cookies joined into one line, RFC 9113 section 8.2.3), Via, then the framing
/// decided for the body (Content-Length: 0 for an empty POST, PUT or PATCH: some origins
/// want a length there, 411).
template <client_side Downstream>
void write_head(Downstream& down, const origin_target& target, std::string_view via_line, relay_buffers& scratch) {
    std::string& out = scratch.head;
    out.clear();
    out += down.method_string();
    out += ' ';
    out += target.no_path && down.method_string() == "OPTIONS" ? std::string_view("*") : std::string_view(target.path);
    out += " HTTP/1.1\r\nHost: ";
    target.append_host(out);
    out += "\r\n";
    std::string& cookies = scratch.added;
    cookies.clear();
    down.message_fields([&](std::string_view name, std::string_view value) {
        if (name != "cookie") return append_field_line(name, value, out);
        if (!cookies.empty()) cookies += "; ";
        cookies += value;
    });
    if (!cookies.empty()) append_field_line("cookie", cookies, out);
    out += via_line;
    const body_framing body = down.body();
    const std::string_view method = down.method_string();
    const bool expects_body = method == "POST" || method == "PUT" || method == "PATCH";
    if (body.kind == body_kind::none && expects_body)
        out += "Content-Length: 0\r\n";
    else
        append_framing(body.kind, body.length, {}, out);
    out += "\r\n";
}

/// scratch.head, then the body as the message gives it: chunked (with the trailers) when
/// its length is unknown. A body of known length is written whole with its last byte,
/// whether the message's end came with it or comes later: the origin may answer from then
/// on, and that answer is not early.
template <client_side Downstream>
task<relay_status> send_request(Downstream& down, timed_socket& origin, relay_buffers& scratch, clock::duration idle) {
    origin.expires_after(idle);
    if (auto [ec, n] = co_await send_all(origin, boost::asio::buffer(scratch.head)); ec)
        co_return relay_status{relay_end::write_failed, ec};
    const body_framing body = down.body();
    if (body.kind == body_kind::none) co_return relay_status{relay_end::done, {}};
    const bool chunked = body.kind == body_kind::chunked;
    const std::span<char> room(scratch.body_buffer(), relay_buffers::chunk_size);
    std::string& framed = scratch.joined;
    std::uint64_t unsent = body.length;
    for (;;) {
        const auto piece = co_await down.read_body(room, idle);
        if (piece.failure.end != relay_end::done) co_return piece.failure;
        framed.clear();
        if (chunked) {
            const std::span<const field> trailers = piece.last ? down.request_trailers() : std::span<const field>();
            append_chunk(room.first(piece.size), piece.last && trailers.empty(), framed);
            if (!trailers.empty()) append_trailer_section(trailers, framed);
        } else
            framed.append(room.data(), piece.size);
        origin.expires_after(idle);
        if (auto [ec, n] = co_await send_all(origin, boost::asio::buffer(framed)); ec)
            co_return relay_status{relay_end::write_failed, ec};
        if (!chunked) unsent -= std::min<std::uint64_t>(unsent, piece.size);
        if (piece.last || (!chunked && unsent == 0)) break;
    }
    origin.expires_never();
    co_return relay_status{relay_end::done, {}};
}

/// How the response's body is read, for a message (no HTTP/1.1 framing to tell).
template <client_side Downstream>
response_plan plan(const Downstream& down, const origin_response_parser& response) {
    return plan_response(response.framing(), response.status(), down.method_string() == "HEAD", 11);
}

/// The response as a message: its head (the origin's fields, names in lower case; the
/// hop-by-hop and framing fields were left out as they arrived; content-length when
/// known), then its body read as the origin framed it, piece by piece as the client takes
/// them, its trailers with the last.
template <client_side Downstream>
task<relay_status> deliver(Downstream& down, exchange& trip, const origin_response_parser& response,
                           const response_plan& plan, timed_socket& origin, boost::beast::flat_buffer& origin_buffer,
                           relay_buffers& scratch, clock::duration idle) {
    response_head head;
    head.status = response.status();
    std::string_view rest = response.forwarded_fields();
    while (!rest.empty()) {
        const std::size_t end = rest.find("\r\n");
        const std::string_view line = rest.substr(0, end);
        rest.remove_prefix(end + 2);
        const std::size_t colon = line.find(':');
        head.fields.push_back({lower_case(line.substr(0, colon)), std::string(line.substr(colon + 2))});
    }
    if (plan.told == body_kind::length) head.fields.push_back({"content-length", std::to_string(plan.length)});
    head.end_stream = plan.from_origin.kind == body_kind::none;
    const relay_status client_gone{relay_end::write_failed, boost::asio::error::connection_aborted};
    if (!co_await down.respond_message(trip, head)) co_return client_gone;
    if (head.end_stream) co_return relay_status{relay_end::done, {}};

    body_reader reader(origin, origin_buffer, plan.from_origin);
    const std::span<char> room(scratch.body_buffer(), relay_buffers::chunk_size);
    for (;;) {
        const auto piece = co_await reader.next(room, idle);
        if (piece.failure.end != relay_end::done) {
            down.body_broken();
            co_return piece.failure;
        }
        const std::span<const field> trailers = piece.last ? reader.trailers() : std::span<const field>();
        if (!co_await down.respond_body(room.first(piece.size), piece.last, trailers)) co_return client_gone;
        if (piece.last) co_return relay_status{relay_end::done, {}};
    }
}

}  // namespace politeproxy::over_h1
