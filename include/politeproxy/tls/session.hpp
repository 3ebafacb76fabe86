#pragma once
// TLS on a timed_socket, both ways: as the origin a client asked for (interception: a
// leaf for its SNI from the leaf cache) and as the client of an HTTPS origin (SNI, the
// certificate verified for the host name). Once a handshake succeeds, the
// timed_socket's reads and writes go through the session, so everything that speaks
// HTTP/1.1 over a timed_socket speaks it over TLS unchanged. OpenSSL through Asio's
// ssl::stream; its headers stay in session.cpp.
#include "politeproxy/base/error.hpp"
#include "politeproxy/base/executor.hpp"
#include "politeproxy/net/timed_socket.hpp"
#include "politeproxy/tls/certificate_authority.hpp"

#include <boost/system/error_code.hpp>
#include <boost/system/result.hpp>

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace politeproxy::tls {

/// Towards clients: TLS as the origin they asked for. One per proxy, shared by the
/// workers (OpenSSL's context is thread-safe for handshakes).
class server_side {
public:
    /// `alpn`: the protocols offered (tls.alpn), in the order they are preferred: the
    /// first of them the client offers is selected.
    /// `counted` hears of each leaf a handshake used: minted for it, or from the cache.
    server_side(leaf_cache& leaves, std::vector<std::string> alpn, std::function<void(bool minted)> counted);
    ~server_side();
    server_side(const server_side&) = delete;
    server_side& operator=(const server_side&) = delete;

    struct impl;
    impl& get() { return *impl_; }

private:
    std::unique_ptr<impl> impl_;
};

/// Towards origins: certificates verified against the system store plus an extra CA
/// file (tls.upstream_ca_file), host names checked; ALPN chosen per connection.
class client_side {
public:
    static boost::system::result<std::unique_ptr<client_side>, std::string> make(const std::string& extra_ca_file);
    ~client_side();

    struct impl;
    impl& get() { return *impl_; }

private:
    client_side();
    std::unique_ptr<impl> impl_;
};

struct handshake_result {
    boost::system::error_code ec;
    std::string verify_error;  ///< why the origin's certificate was refused (empty otherwise)
    std::string server_name;   ///< the SNI a client sent (accept; empty when none)
    std::string protocol;      ///< the ALPN protocol agreed ("h2", "http/1.1"; empty when none)
};

/// Why a handshake with an origin failed, as every path that connects to origins counts
/// and answers it: origin_connect_timeout when the socket's deadline passed,
/// tls_certificate_error when the certificate did not verify, else tls_protocol_error.
using handshake_failure = failure;
handshake_failure origin_handshake_failure(const handshake_result& hs);

/// The state of one TLS connection, owned by its timed_socket.
class session {
public:
    /// Completes TLS with a client as `host` (the CONNECT's host key) would, with a leaf
    /// for it; a client whose SNI names another host is refused (unrecognized_name),
    /// unless `host` is an address. `already_read`: the start of the handshake, read with the
    /// CONNECT. The handshake runs under the socket's deadline.
    static task<handshake_result> accept(timed_socket& client, server_side& side, const std::string& host,
                                         std::string_view already_read);

    /// Completes TLS with an origin: SNI `host` (none for an IP literal), its certificate
    /// verified for `host`, ALPN offering h2 then http/1.1 (`offer_h2`) or http/1.1
    /// alone; the result's `protocol` is the origin's pick. On a failed verification
    /// nothing is sent to the origin.
    static task<handshake_result> connect(timed_socket& origin, client_side& side, const std::string& host,
                                          bool offer_h2);

    /// Ends TLS on a connection as a clean close does: close_notify, then reads until the
    /// peer's close_notify, its FIN, or the socket's deadline (which also drains what it
    /// still sent). Nothing to do on a connection without TLS.
    static task<void> shutdown(timed_socket& connection);

    struct impl;
    explicit session(std::unique_ptr<impl> i);
    ~session();
    impl& get() { return *impl_; }

private:
    std::unique_ptr<impl> impl_;
};

}  // namespace politeproxy::tls
