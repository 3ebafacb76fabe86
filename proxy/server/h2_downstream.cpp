// An HTTP/2 request stream as forward_to_origin's client side (h2_downstream): its head
// and body to the origin, the origin's answer back as HEADERS and DATA.
#include "h2_connection_parts.hpp"

namespace politeproxy::h2_serving {

bool h2_downstream::via_loop(std::string_view via) const {
    return std::any_of(s_->head.fields.begin(), s_->head.fields.end(),
                       [&](const field& f) { return f.name == "via" && via_value_contains(f.value, via); });
}

task<bool> h2_downstream::answer(errc why, std::string_view details, std::optional<clock::duration> retry_after) {
    proxy_context& ctx = conn_->ctx();
    ctx.metrics.rejected(why);
    if (ctx.log.enabled(log_level::debug))
        ctx.log.write(log_level::debug, "answer", make_error_code(why).message() + ": " + std::string(details));
    if (s_->gone.is_set()) co_return false;
    respond_with(make_answer(why, details, true, retry_after));
    co_return false;
}

void h2_downstream::respond_with(const politeproxy::answer& res) {
    if (s_->gone.is_set()) return;
    std::vector<field> fields;
    for (const auto& f : res) {
        const std::string name = lower_case(f.name_string());
        if (name == "connection" || name == "keep-alive") continue;  // connection-specific: not in HTTP/2
        fields.push_back({name, std::string(f.value())});
    }
    const bool head_only = s_->head.method == "HEAD";
    http2::server_session& session = conn_->session();
    session.respond(s_->head.stream, static_cast<unsigned>(res.result_int()), fields, head_only);
    if (!head_only) session.send_body(s_->head.stream, bytes_of(res.body()), true);
    conn_->flush();
}

void h2_downstream::write_head(const origin_target& target, relay_buffers& scratch) const {
    const http2::request_head& head = s_->head;
    std::string& out = scratch.head;
    out.clear();
    out += head.method;
    out += ' ';
    out += target.path;
    out += " HTTP/1.1\r\nHost: ";
    target.append_host(out);
    out += "\r\n";
    // nghttp2 refused connection-specific fields (RFC 9113 section 8.2.2) but TE:
    // trailers; Host, the length and TE are the proxy's to write. Expect is not passed on:
    // the body streams as it comes (a 100 Continue would only be dropped here). Cookies
    // come as separate fields in HTTP/2 and go as one to HTTP/1.1 (section 8.2.3).
    std::string cookies;
    for (const auto& f : head.fields) {
        if (f.name == "host" || f.name == "content-length" || f.name == "te" || f.name == "expect" ||
            for_the_proxy(f.name) || (max_forwards_ >= 0 && f.name == "max-forwards"))
            continue;
        if (f.name == "cookie") {
            if (!cookies.empty()) cookies += "; ";
            cookies += f.value;
            continue;
        }
        append_field_line(f.name, f.value, out);
    }
    if (!cookies.empty()) append_field_line("cookie", cookies, out);
    if (max_forwards_ >= 0) append_field_line("max-forwards", std::to_string(max_forwards_), out);
    out += conn_->ctx().via_line;
    const bool expects_body = head.method == "POST" || head.method == "PUT" || head.method == "PATCH";
    if (body_.kind == body_kind::none && expects_body)
        out += "Content-Length: 0\r\n";  // some origins want a length for an empty POST (411)
    else
        append_framing(body_.kind, body_.length, {}, out);
    out += "\r\n";
}

void h2_downstream::h2_fields(std::vector<field>& out) const {
    // nghttp2 refused connection-specific fields (RFC 9113 section 8.2.2) but TE:
    // trailers; the length and TE are the proxy's to write; Expect is not passed on.
    for (const auto& f : s_->head.fields)
        if (f.name != "host" && f.name != "content-length" && f.name != "te" && f.name != "expect" &&
            !for_the_proxy(f.name) && (max_forwards_ < 0 || f.name != "max-forwards"))
            out.push_back(f);
    if (max_forwards_ >= 0) out.push_back({"max-forwards", std::to_string(max_forwards_)});
    if (body_.kind == body_kind::length) out.push_back({"content-length", std::to_string(body_.length)});
    out.push_back({"via", conn_->ctx().via});
}

task<body_reader::piece> h2_downstream::read_body(std::span<char> room, clock::duration idle) {
    h2_stream& s = *s_;
    while (s.body.empty() && !s.body_ended) {
        if (s.gone.is_set()) co_return body_reader::piece{0, false, {relay_end::read_failed, asio::error::connection_aborted}};
        // A client that stops sending its body holds its slot no longer than timeouts.idle.
        if (!co_await s.changed.wait_until(clock::now() + idle))
            co_return body_reader::piece{0, false, {relay_end::read_failed, beast::error::timeout}};
    }
    const std::size_t n = std::min(room.size(), s.body.size());
    std::memcpy(room.data(), s.body.data(), n);
    s.body.erase(0, n);
    if (n > 0 && !s.gone.is_set()) {
        conn_->session().consumed(s.head.stream, n);  // the client may send as much more
        conn_->flush();
    }
    co_return body_reader::piece{n, s.body_ended && s.body.empty()};
}

task<relay_status> h2_downstream::send_request(timed_socket& origin, relay_buffers& scratch, clock::duration idle) {
    origin.expires_after(idle);
    if (auto [ec, n] = co_await send_all(origin, asio::buffer(scratch.head)); ec)
        co_return relay_status{relay_end::write_failed, ec};
    if (body_.kind == body_kind::none) co_return relay_status{relay_end::done, {}};
    const bool chunked = body_.kind == body_kind::chunked;
    const std::span<char> room(scratch.body_buffer(), relay_buffers::chunk_size);
    std::string& framed = scratch.joined;
    // A body of known length is written whole with its last byte, whether END_STREAM came
    // with it or comes later (nghttp2 holds the client to its content-length): the origin
    // may answer from then on, and that answer is not early.
    std::uint64_t unsent = body_.length;
    for (;;) {
        const auto piece = co_await read_body(room, idle);
        if (piece.failure.end != relay_end::done) co_return piece.failure;
        framed.clear();
        if (chunked) {  // with the client's trailers, if it sent some
            append_chunk(room.first(piece.size), piece.last && s_->trailers.empty(), framed);
            if (piece.last && !s_->trailers.empty()) append_trailer_section(s_->trailers, framed);
        } else
            framed.append(room.data(), piece.size);
        origin.expires_after(idle);
        if (auto [ec, n] = co_await send_all(origin, asio::buffer(framed)); ec)
            co_return relay_status{relay_end::write_failed, ec};
        if (!chunked) unsent -= std::min<std::uint64_t>(unsent, piece.size);
        if (piece.last || (!chunked && unsent == 0)) break;
    }
    origin.expires_never();
    co_return relay_status{relay_end::done, {}};
}

task<bool> h2_downstream::upload_broken(const relay_status& sent) {
    if (!s_->gone.is_set() && sent.ec == beast::error::timeout)
        co_return co_await answer(errc::request_timeout, "the request body stalled for timeouts.idle");
    body_broken();
    co_return false;
}

void h2_downstream::body_broken() {
    if (s_->gone.is_set()) return;
    conn_->session().reset(s_->head.stream, NGHTTP2_INTERNAL_ERROR);  // the client must not take a cut message for whole
    conn_->flush();
}

task<bool> h2_downstream::respond_message(exchange& trip, const http2::response_head& head) {
    if (s_->gone.is_set()) co_return false;
    std::vector<field> fields;
    fields.reserve(head.fields.size() + 2);
    fields = head.fields;
    fields.push_back({"via", conn_->ctx().via});
    std::string status_entry;
    trip.append_proxy_status(status_entry);
    fields.push_back({"proxy-status", std::move(status_entry)});
    const bool no_body = head.end_stream || s_->head.method == "HEAD" || head.status == 204 || head.status == 304;
    conn_->session().respond(s_->head.stream, head.status, fields, no_body);
    responded_whole_ = no_body;
    conn_->flush();
    co_return true;
}

task<bool> h2_downstream::respond_body(std::span<const char> data, bool last, std::span<const field> trailers) {
    h2_stream& s = *s_;
    http2::server_session& session = conn_->session();
    if (responded_whole_) co_return true;  // HEAD, 204, 304: nothing goes
    if (s.gone.is_set()) co_return false;
    session.send_body(s.head.stream, {reinterpret_cast<const std::uint8_t*>(data.data()), data.size()}, last, trailers);
    conn_->flush();
    if (last) co_return true;  // the stream's end is queued: it closes as it goes out
    // Backpressure: while the client's window is shut, take no more from the origin.
    while (session.queued(s.head.stream) >= relay_buffers::chunk_size && !s.gone.is_set())
        co_await conn_->drained().wait();
    co_return !s.gone.is_set();
}

task<relay_status> h2_downstream::deliver(exchange& trip, const origin_response_parser& response,
                                          const response_plan& plan, bool, timed_socket& origin,
                                          beast::flat_buffer& origin_buffer, relay_buffers& scratch,
                                          clock::duration idle) {
    // The origin's fields as HTTP/2 carries them: names in lower case; hop-by-hop and
    // framing fields were left out as they arrived.
    http2::response_head head;
    head.stream = s_->head.stream;
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
    if (!co_await respond_message(trip, head)) co_return relay_status{relay_end::write_failed, asio::error::connection_aborted};
    if (head.end_stream) co_return relay_status{relay_end::done, {}};

    // The body, read as the origin framed it, sent on as DATA as the client's window allows.
    body_reader reader(origin, origin_buffer, plan.from_origin);
    const std::span<char> room(scratch.body_buffer(), relay_buffers::chunk_size);
    for (;;) {
        const auto piece = co_await reader.next(room, idle);
        if (piece.failure.end != relay_end::done) {
            body_broken();
            co_return piece.failure;
        }
        if (!co_await respond_body(room.first(piece.size), piece.last, piece.last ? reader.trailers()
                                                                                 : std::span<const field>()))
            co_return relay_status{relay_end::write_failed, asio::error::connection_aborted};
        if (piece.last) break;
    }
    co_return relay_status{relay_end::done, {}};
}

}  // namespace politeproxy::h2_serving
