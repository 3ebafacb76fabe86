#include "politeproxy/server/h1_client_side.hpp"
#include "politeproxy/exchange/forward_to_origin.hpp"

#include "politeproxy/exchange/exchange.hpp"
#include "politeproxy/tls/session.hpp"

#include "politeproxy/server/send_answer.hpp"
#include "politeproxy/net/dns_resolver.hpp"
#include "politeproxy/base/executor.hpp"
#include "politeproxy/http1/hop_by_hop.hpp"
#include "politeproxy/exchange/host_gates.hpp"
#include "politeproxy/base/log.hpp"
#include "politeproxy/base/metrics.hpp"
#include "politeproxy/base/char_class.hpp"
#include "politeproxy/net/origin_connect.hpp"
#include "politeproxy/net/origin_pool.hpp"
#include "politeproxy/http1/origin_response.hpp"
#include "politeproxy/http1/origin_target.hpp"
#include "politeproxy/exchange/admission.hpp"
#include "politeproxy/http1/read_header.hpp"
#include "politeproxy/http1/relay.hpp"
#include "politeproxy/http1/body_reader.hpp"
#include "politeproxy/net/send_all.hpp"

#include <boost/asio/ssl/error.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/string.hpp>

#include <algorithm>
#include <charconv>
#include <optional>
#include <variant>

namespace politeproxy {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

namespace {

constexpr std::string_view continue_line = "HTTP/1.1 100 Continue\r\n\r\n";

// The proxy's answer to a request body that could not be read whole, when no response
// has begun: the client hears why; the connection closes (the rest of the body is unread).
task<bool> answer_broken_upload(proxy_context& ctx, timed_socket& client, const relay_status& sent) {
    if (sent.end == relay_end::malformed) {
        const std::string details = std::string("malformed chunked body: ") + sent.details;
        co_await send_answer(ctx, client, errc::bad_framing, details, {});
    } else if (sent.ec == beast::error::timeout)
        co_await send_answer(ctx, client, errc::request_timeout, "the request body stalled for timeouts.idle", {});
    co_return false;  // otherwise the client broke off its body: nobody to answer
}

// The forwarded header, into scratch.head: the client's end-to-end fields; the target,
// Host, framing and Max-Forwards written from what the proxy decided, never copied from
// the client's text; then Via.
void write_request_head(http::request_header<wire_fields>& out, const origin_target& target,
                        const request_verdict& verdict, std::string_view via_line, relay_buffers& scratch) {
    strip_hop_by_hop(out);
    if (verdict.framing_fields) {
        out.erase(http::field::transfer_encoding);
        out.erase(http::field::content_length);
    }
    if (verdict.max_forwards >= 0) out.erase(http::field::max_forwards);
    out.target(out.method() == http::verb::options && target.no_path ? std::string_view("*")
                                                                       : std::string_view(target.path));
    out.version(11);
    std::string& added = scratch.added;
    added.clear();
    target.append_host(added);
    out.set(http::field::host, added);
    added = via_line;
    append_framing(verdict.body.kind, verdict.body.length, {}, added);
    if (verdict.max_forwards >= 0) {
        added += "Max-Forwards: ";
        added += std::to_string(verdict.max_forwards);
        added += "\r\n";
    }
    scratch.head.clear();
    serialize_head(out, added, scratch.head);
}


// The client's side of a request from an HTTP/1.1 connection (plain, or inside
// intercepted TLS): its header as Beast read it, its body still in the socket.
class h1_client_side {
public:
    h1_client_side(proxy_context& ctx, timed_socket& client, beast::flat_buffer& buffer,
                     request_header_parser& header, const request_verdict& verdict, std::shared_ptr<client_state> who)
        : ctx_(ctx), client_(client), buffer_(buffer), req_(header.get()), verdict_(verdict), who_(std::move(who)),
          // Read before write_head() makes the header the origin's (HTTP/1.1).
          client_version_(req_.version()), client_keep_alive_(req_.keep_alive()), method_(req_.method()) {
        // An answer given before the body was read must close: the body is still unread.
        keeping_ = {client_keep_alive_ && !verdict_.has_body(), method_ == http::verb::head};
        expect_continue_ = beast::iequals(req_[http::field::expect], "100-continue");
    }

    bool via_loop(std::string_view via) const { return via_contains(req_, via); }
    bool retryable() const { return !verdict_.has_body() && forwarding::idempotent(method_); }
    std::string_view method_string() const { return http::to_string(method_); }
    std::string_view user_agent() const { return req_[http::field::user_agent]; }
    const std::shared_ptr<client_state>& client() const { return who_; }
    wire_allocator arena() { return req_.get_allocator(); }

    task<bool> answer(errc why, std::string_view details, std::optional<clock::duration> retry_after = {},
                      std::string_view next_hop = {}) {
        // Once the request went out (and for a loop) the connection closes: what the
        // client sent may be half read, and the origin's side is in doubt.
        const bool keep = keeping_.keep_alive && !sent_ && why != errc::loop_detected;
        return send_answer(ctx_, client_, why, details, answer_mode{keep, keeping_.head}, retry_after, next_hop);
    }

    client_watch parking() {
        // Parked, it keeps no read buffer (4 KiB); the next read takes one again.
        if (buffer_.size() == 0) buffer_.shrink_to_fit();
        return &client_.socket();
    }

    void write_head(const origin_target& target, relay_buffers& scratch) {
        if (expect_continue_) req_.erase(http::field::expect);  // answered here once the slot is held
        write_request_head(req_, target, verdict_, ctx_.via_line, scratch);
    }

    bool wants_continue() const { return expect_continue_ && !continue_sent_; }
    task<bool> send_continue() {
        continue_sent_ = true;
        client_.expires_after(ctx_.gates.current_config()->defaults.timeouts.idle);
        auto [ec, n] = co_await asio::async_write(client_, asio::buffer(continue_line), use_tuple);
        co_return !ec;
    }

    task<relay_status> send_request(timed_socket& origin, relay_buffers& scratch, clock::duration idle) {
        sent_ = true;
        return relay(client_, buffer_, verdict_.body, verdict_.body.kind == body_kind::chunked, origin, idle, scratch);
    }

    task<bool> upload_broken(const relay_status& sent) { return answer_broken_upload(ctx_, client_, sent); }

    response_plan plan(const origin_response_parser& response) const {
        return plan_response(response.framing(), response.status(), method_ == http::verb::head, client_version_);
    }

    bool keeps(const response_plan& plan) const { return client_keep_alive_ && !ctx_.draining && !plan.ends_at_close; }

    task<relay_status> deliver(exchange& trip, const origin_response_parser& response, const response_plan& plan,
                               bool keep, timed_socket& origin, beast::flat_buffer& origin_buffer,
                               relay_buffers& scratch, clock::duration idle) {
        std::string& added = scratch.added;
        added = ctx_.via_line;
        added += "Proxy-Status: ";
        trip.append_proxy_status(added);
        added += "\r\n";
        append_framing(plan.told, plan.length, response.other_codings(), added);
        if (!keep) added += "Connection: close\r\n";
        scratch.head.clear();
        response.write_head(added, scratch.head);
        return relay(origin, origin_buffer, plan.from_origin, plan.out_chunked, client_, idle, scratch);
    }

    // The request and its response as messages, for an HTTP/2 origin (exchange/h2_origin_stream.hpp).

    template <class Each>
    void message_fields(Each each) {
        strip_hop_by_hop(req_);
        for (const auto& f : req_) {
            const http::field name = f.name();
            if (name == http::field::host || name == http::field::content_length ||
                name == http::field::transfer_encoding || name == http::field::max_forwards ||
                (name == http::field::expect && expect_continue_))
                continue;
            each(lower_case(f.name_string()), f.value());
        }
        if (verdict_.max_forwards >= 0) each("max-forwards", std::to_string(verdict_.max_forwards));
    }

    body_framing body() const { return verdict_.body; }
    bool has_body() const { return verdict_.has_body(); }
    std::span<const field> request_trailers() const {
        return body_ ? body_->trailers() : std::span<const field>();
    }

    task<body_reader::piece> read_body(std::span<char> room, clock::duration idle) {
        sent_ = true;
        if (!body_) body_.emplace(client_, buffer_, verdict_.body);
        return body_->next(room, idle);
    }

    task<bool> respond_message(exchange& trip, const response_head& head) {
        framing_reader declared;
        for (const auto& f : head.fields)
            if (f.name == "content-length") declared.content_length(f.value);  // nghttp2 checked it against the DATA
        body_framing framing;
        declared.response(11, framing);
        plan_ = plan_response(framing, head.status, method_ == http::verb::head, client_version_);
        std::string& out = response_head_;
        out = "HTTP/1.1 ";
        out += std::to_string(head.status);
        out += ' ';
        out += http::obsolete_reason(static_cast<http::status>(head.status));
        out += "\r\n";
        for (const auto& f : head.fields) {
            if (f.name == "content-length") continue;
            append_field_line(f.name, f.value, out);
        }
        out += ctx_.via_line;
        out += "Proxy-Status: ";
        trip.append_proxy_status(out);
        out += "\r\n";
        append_framing(plan_.told, plan_.length, {}, out);
        if (!keeps_message()) out += "Connection: close\r\n";
        out += "\r\n";
        sent_ = true;
        client_.expires_after(ctx_.gates.current_config()->defaults.timeouts.idle);
        auto [ec, n] = co_await send_all(client_, asio::buffer(out));
        client_.expires_never();
        co_return !ec;
    }

    task<bool> respond_body(std::span<const char> data, bool last, std::span<const field> trailers) {
        if (plan_.from_origin.kind == body_kind::none) co_return true;  // HEAD, 204, 304: nothing goes
        std::string& out = response_head_;
        out.clear();
        if (plan_.out_chunked) {  // a chunked body carries trailers; one of known length cannot
            append_chunk(data, last && trailers.empty(), out);
            if (last && !trailers.empty()) append_trailer_section(trailers, out);
        } else {
            out.append(data.data(), data.size());
        }
        if (out.empty()) co_return true;
        client_.expires_after(ctx_.gates.current_config()->defaults.timeouts.idle);
        auto [ec, n] = co_await send_all(client_, asio::buffer(out));
        client_.expires_never();
        co_return !ec;
    }

    void body_broken() {}  // the connection closes: the client sees the body cut short

    /// Not when the origin answered before the request body was read whole: its rest is
    /// still in the connection and must not be taken for the next request.
    bool keeps_message() const { return keeps(plan_) && (!has_body() || (body_ && body_->ended())); }

    void watch(event*) {}  // a client that goes away is noticed when its connection is next used
    bool client_gone() const { return false; }

private:
    proxy_context& ctx_;
    timed_socket& client_;
    beast::flat_buffer& buffer_;
    request_header_parser::value_type& req_;
    const request_verdict& verdict_;
    std::shared_ptr<client_state> who_;  ///< whose request (clients:)
    const unsigned client_version_;
    const bool client_keep_alive_;
    const http::verb method_;
    answer_mode keeping_;
    bool expect_continue_ = false;
    bool continue_sent_ = false;
    bool sent_ = false;  ///< the request started going to the origin
    std::optional<body_reader> body_;  ///< the request body, for an HTTP/2 origin
    response_plan plan_;               ///< the response's, from an HTTP/2 origin
    std::string response_head_;        ///< its header and body pieces on their way
};
// The HTTP/1.1 client takes the fast path to an HTTP/1.1 origin (exchange/client_side.hpp).
static_assert(relays_http1<h1_client_side>);

}  // namespace

task<bool> forward_request(proxy_context& ctx, const config& cfg, timed_socket& client, beast::flat_buffer& buffer,
                           request_header_parser& header, const request_verdict& verdict,
                           const origin_target& target, std::shared_ptr<client_state> who) {
    return forward_to_origin(ctx, cfg, h1_client_side(ctx, client, buffer, header, verdict, std::move(who)), target);
}

}  // namespace politeproxy
