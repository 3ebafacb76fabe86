#include "h2_connection_parts.hpp"

namespace politeproxy {
namespace asio = boost::asio;
namespace beast = boost::beast;
using h2_serving::h2_connection;

namespace h2_serving {

task<void> h2_connection::serve_stream(std::shared_ptr<h2_stream> s) {
    const auto cfg = ctx_.gates.current_config();
    field_arena arena(ctx_.field_blocks);
    const http2::request_head& head = s->head;
    // The body's framing towards the origin: none, the client's content-length
    // (nghttp2 holds the DATA to it), else chunked.
    body_framing body;
    framing_reader framing;
    for (const auto& f : head.fields)
        if (f.name == "content-length") framing.content_length(f.value);
    if (!head.end_stream && framing.request(11, body) == framing_fault::none && body.kind == body_kind::none)
        body.kind = body_kind::chunked;
    const request_verdict verdict = judge_head(head, cfg->limits, in_tls_ != nullptr);
    h2_client_side down(*this, s, arena.allocator(), body, verdict.max_forwards);

    if (!allowed_) {
        co_await down.answer(errc::client_denied, "client is not in security.allow_clients");
        co_return;
    }
    // The entry's checks in their order, as on HTTP/1.1 (policy/entry_rules.hpp): the
    // head, then the target and its destination, then the credentials: a refused request
    // costs no hash.
    if (verdict.refusal) {
        co_await down.answer(*verdict.refusal, verdict.details);
        co_return;
    }
    std::variant<origin_target, target_error> target = target_error{errc::bad_request, ""};
    if (!verdict.answer_options) {
        if (in_tls_) {
            // As an HTTP/1.1 request inside the same TLS: to the connection's origin only.
            target = parse_intercepted_target(head.path, head.authority, head.method == "OPTIONS", in_tls_->target,
                                              in_tls_->name_key, arena.allocator());
        } else {
            // The HTTP/2 form of an absolute-form target: the same parser, the same checks.
            std::pmr::string text(arena.allocator());
            text.reserve(7 + head.authority.size() + head.path.size());
            text += "http://";
            text += head.authority;
            text += head.path;
            target = parse_origin_target(text, arena.allocator());
        }
        if (const auto no = refuse_target(*cfg, target)) {
            co_await down.answer(no->why, no->details);
            co_return;
        }
    }
    std::string user;
    if (!in_tls_ && cfg->security.users) {  // inside intercepted TLS the CONNECT was authorized
        proxy_credentials credentials;
        credentials.required = true;
        for (const auto& f : head.fields)
            if (f.name == "proxy-authorization") credentials.add(f.value);
        if (const auto refused = co_await check_credentials(*cfg, credentials, user); refused) {
            co_await down.answer(refused->why, refused->details, refused->retry_after);
            if (credentials_refused_ && s->gone.is_set()) drain();  // no stream close left to do it
            co_return;
        }
    }
    if (verdict.answer_options) {
        down.respond_with(make_options_answer(true));
        co_return;
    }
    if (cfg->clients) {  // whose request; its identify_by header goes no further
        const client_facts facts{.user = user, .peer = peer_, .outer = in_tls_ ? std::string_view(in_tls_->client) : ""};
        down.belongs_to(
            identify_client(ctx_.gates.clients(), *cfg->clients, facts, s->head.fields, ctx_.gates.time().now()));
    }
    co_await forward_to_origin(ctx_, *cfg, std::move(down), std::get<origin_target>(target));
    // Answered, maybe before the request body was read whole: its rest is dropped as it
    // comes (the client's window must not close on bytes nobody reads).
    s->discarding = true;
    if (!s->body.empty() && !s->gone.is_set()) {
        session_.consumed(head.stream, s->body.size());
        flush();
    }
    s->body.clear();
}

}  // namespace h2_serving

task<void> serve_h2(proxy_context& ctx, timed_socket& client, beast::flat_buffer& buffer,
                    session_set::handle& registration, bool allowed, const intercepted_origin* in_tls) {
    connection_tracker tracked(ctx.metrics, connection_side::client, connection_protocol::http2);
    h2_connection conn(ctx, client, *ctx.gates.current_config(), allowed, in_tls);
    registration.drain = [&conn] { conn.drain(); };
    struct forget_drain {
        session_set::handle& h;
        ~forget_drain() { h.drain = nullptr; }
    } const forget{registration};
    if (ctx.draining) conn.drain();  // began while this connection opened
    co_await conn.run(buffer);
}

}  // namespace politeproxy