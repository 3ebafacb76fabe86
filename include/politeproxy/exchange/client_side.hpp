#pragma once
// The interface between the exchange and the client it serves: what forward_to_origin
// (exchange/forward_to_origin.hpp) asks of the client's side of one request.
//
// Names. nghttpx calls the client-facing half of a proxied request its Upstream and the
// origin-facing one its Downstream, both around one Downstream object for the request;
// Envoy uses the same two words the other way round (the client's connection is its
// downstream, a codec turning its bytes into streams; the exchange is the router; the
// origin's side the upstream). Since the two disagree, politeproxy uses neither (STYLE:
// client_* and origin_*) and maps onto both by role: the client's side (`Client` in the
// templates, server/h1_client_side and server/h2_client_side its two adapters) is
// nghttpx's Upstream and Envoy's downstream codec; the exchange (exchange/) is nghttpx's
// Downstream and Envoy's router; the origin transports (exchange/origin_transport.hpp:
// h1_origin_transport, h2_origin_stream) are nghttpx's DownstreamConnection and Envoy's
// upstream.
//
// Why these methods. The exchange is protocol-neutral: it holds the request as a message
// (its head, its fields, the framing decided for its body, the body in pieces) and
// hands the response back as one (a head, body pieces, trailers). Every method is one
// thing the exchange cannot know without asking the client's protocol:
//  - head queries the gate, the loop check and the retry decision need (via_loop,
//    retryable, method_string, user_agent, client: whose request it is, decided by the
//    client's side at its entry) and where a response header's memory comes from (arena);
//  - the request as a message, for whichever transport the origin speaks (body,
//    has_body, message_fields, read_body, request_trailers);
//  - the proxy's own answers, in the client's framing (answer, upload_broken), and what
//    the client does while the request waits (parking: what tells it left; 100 Continue);
//  - the response as a message (respond_message, respond_body, body_broken) and whether
//    the client connection goes on (keeps_message); watch/client_gone let a wait on an
//    HTTP/2 origin stream end when the client goes away.
// A template parameter, not a virtual base: the HTTP/1.1 path is every request's, and a
// virtual call per step costs it (measured with callgrind, tests/bench/instructions_ab.py).
#include "politeproxy/base/clock.hpp"
#include "politeproxy/base/error.hpp"
#include "politeproxy/base/event.hpp"
#include "politeproxy/base/executor.hpp"
#include "politeproxy/base/field.hpp"
#include "politeproxy/base/response_head.hpp"
#include "politeproxy/exchange/admission.hpp"
#include "politeproxy/exchange/client_book.hpp"
#include "politeproxy/exchange/exchange.hpp"
#include "politeproxy/http1/body_reader.hpp"
#include "politeproxy/http1/framing.hpp"
#include "politeproxy/http1/origin_response.hpp"
#include "politeproxy/http1/origin_target.hpp"
#include "politeproxy/http1/relay.hpp"
#include "politeproxy/http1/wire_fields.hpp"
#include "politeproxy/net/timed_socket.hpp"

#include <boost/beast/core/flat_buffer.hpp>

#include <concepts>
#include <optional>
#include <span>
#include <string_view>

namespace politeproxy {

/// The client's side of one request, as every client protocol gives it.
template <class D>
concept client_side = requires(D& down, const D& seen, std::span<char> room, clock::duration idle, errc why,
                               std::string_view text, std::optional<clock::duration> retry_after, exchange& trip,
                               const response_head& head, std::span<const char> data,
                               std::span<const field> trailers, const relay_status& status, event* wake) {
    // The head.
    { seen.via_loop(text) } -> std::same_as<bool>;       // this proxy's Via entry came back
    { seen.retryable() } -> std::same_as<bool>;          // may be sent again on a new connection
    { seen.method_string() } -> std::convertible_to<std::string_view>;
    { seen.user_agent() } -> std::convertible_to<std::string_view>;  // robots.txt groups
    { seen.client() } -> std::same_as<const std::shared_ptr<client_state>&>;  // whose request (clients:)
    { down.arena() } -> std::same_as<wire_allocator>;    // the response header's memory
    // The request as a message.
    { seen.body() } -> std::same_as<body_framing>;       // none, a length, or streamed
    { seen.has_body() } -> std::same_as<bool>;
    down.message_fields([](std::string_view, std::string_view) {});  // end-to-end fields, lower case
    { down.read_body(room, idle) } -> std::same_as<task<body_reader::piece>>;
    { seen.request_trailers() } -> std::same_as<std::span<const field>>;
    // The proxy's own answers, and waits.
    { down.answer(why, text, retry_after) } -> std::same_as<task<bool>>;  // true: the connection goes on
    { down.answer(why, text, retry_after, text) } -> std::same_as<task<bool>>;  // with a next-hop (a parent)
    { down.parking() } -> std::same_as<client_watch>;
    { seen.wants_continue() } -> std::same_as<bool>;
    { down.send_continue() } -> std::same_as<task<bool>>;
    { down.upload_broken(status) } -> std::same_as<task<bool>>;
    // The response as a message.
    { down.respond_message(trip, head) } -> std::same_as<task<bool>>;
    { down.respond_body(data, true, trailers) } -> std::same_as<task<bool>>;
    down.body_broken();
    { seen.keeps_message() } -> std::same_as<bool>;
    down.watch(wake);
    { seen.client_gone() } -> std::same_as<bool>;
};

/// A client that relays HTTP/1.1 bytes itself to an HTTP/1.1 origin: its header
/// rewritten in place and both bodies passed through as they are framed, the proxy's
/// fastest path (no message is made of either). Any other client's messages are framed
/// for an HTTP/1.1 origin by h1_origin_transport.hpp.
template <class D>
concept relays_http1 =
    client_side<D> && requires(D& down, const D& seen, const origin_target& target, relay_buffers& scratch,
                               timed_socket& origin, clock::duration idle, const origin_response_parser& response,
                               const response_plan& plan, exchange& trip, boost::beast::flat_buffer& buffer) {
        down.write_head(target, scratch);  // the origin's request head, into scratch.head
        { down.send_request(origin, scratch, idle) } -> std::same_as<task<relay_status>>;
        { seen.plan(response) } -> std::same_as<response_plan>;
        { seen.keeps(plan) } -> std::same_as<bool>;
        { down.deliver(trip, response, plan, true, origin, buffer, scratch, idle) } -> std::same_as<task<relay_status>>;
    };

}  // namespace politeproxy
