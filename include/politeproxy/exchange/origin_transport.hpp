#pragma once
// The interface between the exchange and the connection that carries a request to its
// origin: what every origin transport does for forward_to_origin
// (exchange/forward_to_origin.hpp), which picks one for each attempt.
//
// Names (client_side.hpp says why neither nghttpx's words nor Envoy's): the transports
// are h1_origin_transport (a pooled or new HTTP/1.1 connection,
// exchange/h1_origin_transport.hpp) and h2_origin_stream (a stream on a shared HTTP/2
// session, exchange/h2_origin_stream.hpp), the counterparts of the client adapters
// server/h1_client_side and server/h2_client_side. Envoy's router calls this part a
// GenericUpstream (HttpUpstream, TcpUpstream), made by a connection pool chosen by the
// cluster's protocol; nghttpx calls it a DownstreamConnection (HttpDownstreamConnection:
// a pooled HTTP/1.1 connection; Http2DownstreamConnection: a stream on a shared
// Http2Session). In both, no client codec knows which one carries the request, and none
// of them knows the client's codec.
//
// Why one method. Envoy's GenericUpstream is driven by callbacks (encodeHeaders, encodeData,
// encodeTrailers down; the response's headers and data back up through the router), as
// nghttpx's is (push_request_headers, push_upload_data_chunk, end_upload_data). Here one
// request's trip is one coroutine: the transport pulls the request from the client's side
// (its head as fields, read_body) and pushes the response to it (respond_message,
// respond_body), in the order its protocol needs: HTTP/1.1 writes the head, waits for
// 100 Continue, sends the body, skips interim responses, then relays the response;
// HTTP/2 sends the body as the origin's flow-control window takes it and may get the
// answer before the body ends. So the whole contract is one awaitable step:
//   forward(down, trip, target, scratch) -> forwarded
//  - down: the client's side (client_side.hpp), the transport's only way to the client;
//    it learns nothing of the client's protocol. The one question it may ask, at compile
//    time, is whether the client relays HTTP/1.1 bytes itself (relays_http1): then an
//    HTTP/1.1 transport hands it the origin's connection and no message is made.
//  - trip: the request's exchange; the transport reports every step to it (request_sent,
//    response_arrived with whether the connection was reused, origin_done, each failure),
//    so the host's health, the counters and Proxy-Status see the same events whatever
//    carried the request.
//  - target: where the request goes (scheme, authority, path).
//  - scratch: the request's buffers (the head, the body's chunk, the pool key).
// What a transport forwards on (the connection or session, whether it was reused,
// whether the request may go again) goes to its constructor: forward_to_origin chose it,
// from the pool, the HTTP/2 sessions or a new connection (exchange/origin_open), by the
// host's `upstream` (upstream_protocol) and the origin's ALPN. A transport gives back
// what it was lent when the exchange ended clean (an HTTP/1.1 connection to the pool).
//
// A third transport (a parent proxy, say) is a class with its state and forward(), and
// one more case where forward_to_origin picks.
//
// A concept, not a virtual base: every request goes through a transport, and the
// HTTP/1.1 one is on the proxy's fastest path (a virtual call or a heap object per
// request costs it; tests/bench/instructions_ab.py). forward() is a coroutine, one frame
// per attempt.
#include "politeproxy/base/executor.hpp"
#include "politeproxy/exchange/client_side.hpp"
#include "politeproxy/exchange/exchange.hpp"
#include "politeproxy/http1/origin_target.hpp"
#include "politeproxy/http1/relay.hpp"

#include <concepts>

namespace politeproxy {

/// How a transport's forward() ended.
enum class forwarded {
    keep,   ///< the client was answered (by the origin, or by the proxy); its connection goes on
    close,  ///< answered or broken off; the client connection closes
    again,  ///< the origin did not process the request and the client saw nothing: it may go
            ///< again on a new connection or session (forward_to_origin decides)
};

/// The client answered, its connection going on when `keep`.
constexpr forwarded finished(bool keep) { return keep ? forwarded::keep : forwarded::close; }

/// A way to the origin for one attempt of one request from the client's side `Client`.
template <class T, class Client>
concept origin_transport =
    client_side<Client> &&
    requires(T& transport, Client& down, exchange& trip, const origin_target& target, relay_buffers& scratch) {
        { transport.forward(down, trip, target, scratch) } -> std::same_as<task<forwarded>>;
    };

}  // namespace politeproxy
