// An HTTP/2 request stream as forward_to_origin's client side (h2_client_side): the request
// as a message, the response back as HEADERS and DATA.
#include "h2_connection_parts.hpp"

#include <array>

namespace politeproxy::h2_serving {

bool h2_client_side::via_loop(std::string_view via) const {
    return std::any_of(s_->head.fields.begin(), s_->head.fields.end(),
                       [&](const field& f) { return f.name == "via" && via_value_contains(f.value, via); });
}

task<bool> h2_client_side::answer(errc why, std::string_view details, std::optional<clock::duration> retry_after,
                                  std::string_view next_hop) {
    proxy_context& ctx = conn_->ctx();
    count_answer(ctx, why, details);
    if (s_->gone.is_set()) co_return false;
    respond_with(make_answer(why, details, true, retry_after, next_hop));
    co_return false;
}

void h2_client_side::respond_with(const politeproxy::answer& res) {
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

task<body_reader::piece> h2_client_side::read_body(std::span<char> room, clock::duration idle) {
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

task<bool> h2_client_side::upload_broken(const relay_status& sent) {
    if (!s_->gone.is_set() && sent.ec == beast::error::timeout)
        co_return co_await answer(errc::request_timeout, "the request body stalled for timeouts.idle");
    body_broken();
    co_return false;
}

void h2_client_side::body_broken() {
    if (s_->gone.is_set()) return;
    conn_->session().reset(s_->head.stream, NGHTTP2_INTERNAL_ERROR);  // the client must not take a cut message for whole
    conn_->flush();
}

task<bool> h2_client_side::respond_message(exchange& trip, const response_head& head) {
    if (s_->gone.is_set()) co_return false;
    std::array<field, 2> added{field{"via", conn_->ctx().via}, field{"proxy-status", {}}};
    trip.append_proxy_status(added[1].value);
    const bool no_body = head.end_stream || s_->head.method == "HEAD" || head.status == 204 || head.status == 304;
    conn_->session().respond(s_->head.stream, head.status, head.fields, no_body, added);
    responded_whole_ = no_body;
    conn_->flush();
    co_return true;
}

task<bool> h2_client_side::respond_body(std::span<const char> data, bool last, std::span<const field> trailers) {
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

}  // namespace politeproxy::h2_serving
