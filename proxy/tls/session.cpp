#include "politeproxy/tls/session.hpp"

#include "politeproxy/policy/host_key.hpp"

#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/ssl/stream.hpp>

#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <chrono>
#include <cstring>

namespace politeproxy::tls {
namespace asio = boost::asio;
namespace ssl = boost::asio::ssl;

// ---- towards clients ----------------------------------------------------------------

struct server_side::impl {
    leaf_cache& leaves;
    std::vector<std::string> alpn;
    std::function<void(bool minted)> counted;
    ssl::context ctx{ssl::context::tls_server};
    int host_index = -1;  ///< SSL ex_data slot: the CONNECT host, for clients without SNI

    // During the ClientHello: the leaf for the CONNECT host. A client's SNI must name
    // that host (any name when the CONNECT named an address): else one allowed CONNECT
    // could have leaves minted for any number of names.
    static int on_server_name(SSL* s, int* alert, void* arg) {
        auto* self = static_cast<impl*>(arg);
        const auto* connect_host = static_cast<const std::string*>(SSL_get_ex_data(s, self->host_index));
        if (!connect_host || connect_host->empty()) {
            *alert = SSL_AD_INTERNAL_ERROR;
            return SSL_TLSEXT_ERR_ALERT_FATAL;
        }
        std::string name = *connect_host;
        if (const char* sni = SSL_get_servername(s, TLSEXT_NAMETYPE_host_name)) {
            const auto named = read_host(sni);
            const bool by_address = parse_host_address(*connect_host).has_value();
            if (!named || (!by_address && named->key != *connect_host)) {
                *alert = SSL_AD_UNRECOGNIZED_NAME;
                return SSL_TLSEXT_ERR_ALERT_FATAL;
            }
            name = named->key;
        }
        try {
            bool minted = false;
            const leaf l = self->leaves.get(name, std::chrono::system_clock::now(), &minted);
            if (self->counted) self->counted(minted);
            if (SSL_use_certificate(s, l.cert.get()) != 1 || SSL_use_PrivateKey(s, l.key.get()) != 1) {
                *alert = SSL_AD_INTERNAL_ERROR;
                return SSL_TLSEXT_ERR_ALERT_FATAL;
            }
        } catch (const std::exception&) {
            *alert = SSL_AD_INTERNAL_ERROR;
            return SSL_TLSEXT_ERR_ALERT_FATAL;
        }
        return SSL_TLSEXT_ERR_OK;
    }

    // ALPN: the first of tls.alpn, in its order, that the client offers (the loader
    // makes it list http/1.1); none when the client offers none of them.
    static int on_alpn(SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in,
                       unsigned int inlen, void* arg) {
        const auto& self = *static_cast<const impl*>(arg);
        for (const std::string& wanted : self.alpn) {
            for (unsigned i = 0; i < inlen;) {
                const unsigned len = in[i];
                if (i + 1 + len > inlen) break;
                if (len == wanted.size() && std::memcmp(in + i + 1, wanted.data(), len) == 0) {
                    *out = in + i + 1;
                    *outlen = static_cast<unsigned char>(len);
                    return SSL_TLSEXT_ERR_OK;
                }
                i += 1 + len;
            }
        }
        return SSL_TLSEXT_ERR_NOACK;
    }
};

server_side::server_side(leaf_cache& leaves, std::vector<std::string> alpn, std::function<void(bool)> counted)
    : impl_(std::make_unique<impl>(impl{leaves, std::move(alpn), std::move(counted)})) {
    SSL_CTX* ctx = impl_->ctx.native_handle();
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
    // The leaf alone is sent (clients trust the CA): no chain is built per handshake.
    SSL_CTX_set_mode(ctx, SSL_MODE_NO_AUTO_CHAIN);
    impl_->host_index = SSL_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
    SSL_CTX_set_tlsext_servername_callback(ctx, &impl::on_server_name);
    SSL_CTX_set_tlsext_servername_arg(ctx, impl_.get());
    SSL_CTX_set_alpn_select_cb(ctx, &impl::on_alpn, impl_.get());
}

server_side::~server_side() = default;

// ---- towards origins ----------------------------------------------------------------

struct client_side::impl {
    ssl::context ctx{ssl::context::tls_client};
};

client_side::client_side() : impl_(std::make_unique<impl>()) {}
client_side::~client_side() = default;

boost::system::result<std::unique_ptr<client_side>, std::string> client_side::make(const std::string& extra_ca_file) {
    std::unique_ptr<client_side> side(new client_side());
    ssl::context& ctx = side->impl_->ctx;
    boost::system::error_code ec;
    ctx.set_default_verify_paths(ec);
    if (ec) return "the system's certificate store: " + ec.message();
    if (!extra_ca_file.empty()) {
        ctx.load_verify_file(extra_ca_file, ec);
        if (ec) return extra_ca_file + ": " + ec.message();
    }
    // OpenSSL works out a certificate's extensions lazily, on first use; the trusted
    // certificates loaded now are shared by every origin handshake on every worker: now.
    X509_STORE* store = SSL_CTX_get_cert_store(ctx.native_handle());
    STACK_OF(X509_OBJECT)* objects = X509_STORE_get0_objects(store);
    for (int i = 0; i < sk_X509_OBJECT_num(objects); ++i)
        if (X509* trusted = X509_OBJECT_get0_X509(sk_X509_OBJECT_value(objects, i)))
            X509_check_purpose(trusted, -1, 0);
    ctx.set_verify_mode(ssl::verify_peer);
    SSL_CTX* native = ctx.native_handle();
    SSL_CTX_set_min_proto_version(native, TLS1_2_VERSION);
    return side;
}

// ---- a connection -------------------------------------------------------------------

struct session::impl {
    impl(timed_socket& t, ssl::context& ctx) : stream(timed_socket::wire(t), ctx) {}
    ssl::stream<timed_socket::wire> stream;
};

session::session(std::unique_ptr<impl> i) : impl_(std::move(i)) {}
session::~session() = default;

task<handshake_result> session::accept(timed_socket& client, server_side& side, const std::string& host,
                                       std::string_view already_read) {
    auto s = std::make_shared<session>(std::make_unique<impl>(client, side.get().ctx));
    SSL* native = s->get().stream.native_handle();
    SSL_set_ex_data(native, side.get().host_index, const_cast<std::string*>(&host));
    auto [ec, used] = co_await s->get().stream.async_handshake(
        ssl::stream_base::server, asio::buffer(already_read.data(), already_read.size()), use_tuple);
    handshake_result r{ec, {}, {}, {}};
    if (const char* sni = SSL_get_servername(native, TLSEXT_NAMETYPE_host_name)) r.server_name = sni;
    const unsigned char* protocol = nullptr;
    unsigned protocol_size = 0;
    SSL_get0_alpn_selected(native, &protocol, &protocol_size);
    if (protocol) r.protocol.assign(reinterpret_cast<const char*>(protocol), protocol_size);
    SSL_set_ex_data(native, side.get().host_index, nullptr);  // `host` is the caller's
    if (!ec) client.state_->tls = std::move(s);
    co_return r;
}

task<handshake_result> session::connect(timed_socket& origin, client_side& side, const std::string& host,
                                        bool offer_h2) {
    auto s = std::make_shared<session>(std::make_unique<impl>(origin, side.get().ctx));
    SSL* native = s->get().stream.native_handle();
    static const unsigned char h2_and_http1[] = "\x02h2\x08http/1.1";
    static const unsigned char http1_only[] = "\x08http/1.1";
    if (offer_h2)
        SSL_set_alpn_protos(native, h2_and_http1, sizeof h2_and_http1 - 1);
    else
        SSL_set_alpn_protos(native, http1_only, sizeof http1_only - 1);
    // The name check is what makes a trusted certificate this origin's: no handshake without it.
    const bool named = parse_host_address(host)
                           ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(native), host.c_str()) == 1
                           : SSL_set_tlsext_host_name(native, host.c_str()) == 1 && SSL_set1_host(native, host.c_str()) == 1;
    if (!named) co_return handshake_result{asio::error::invalid_argument, "the origin's name could not be set for "
                                                                          "verification", {}, {}};
    auto [ec] = co_await s->get().stream.async_handshake(ssl::stream_base::client, use_tuple);
    handshake_result r{ec, {}, {}, {}};
    if (ec) {
        const long verdict = SSL_get_verify_result(native);
        if (verdict != X509_V_OK) r.verify_error = X509_verify_cert_error_string(verdict);
    } else {
        const unsigned char* protocol = nullptr;
        unsigned protocol_size = 0;
        SSL_get0_alpn_selected(native, &protocol, &protocol_size);
        if (protocol) r.protocol.assign(reinterpret_cast<const char*>(protocol), protocol_size);
        origin.state_->tls = std::move(s);
    }
    co_return r;
}

handshake_failure origin_handshake_failure(const handshake_result& hs) {
    if (hs.ec == boost::beast::error::timeout)
        return {errc::origin_connect_timeout, "TLS handshake not done within timeouts.connect"};
    if (!hs.verify_error.empty()) return {errc::tls_certificate_error, hs.verify_error};
    return {errc::tls_protocol_error, hs.ec.message()};
}

task<void> session::shutdown(timed_socket& connection) {
    const std::shared_ptr<session> s = connection.state_->tls;
    if (!s) co_return;
    co_await s->get().stream.async_shutdown(use_tuple);
}

}  // namespace politeproxy::tls

namespace politeproxy {

void timed_socket::tls_read_some(state& s, boost::asio::mutable_buffer b, io_handler handler) {
    s.tls->get().stream.async_read_some(b, std::move(handler));
}

void timed_socket::tls_write_some(state& s, boost::asio::const_buffer b, io_handler handler) {
    s.tls->get().stream.async_write_some(b, std::move(handler));
}

bool timed_socket::tls_holds_unread(state& s) {
    SSL* ssl = s.tls->get().stream.native_handle();
    // Records decrypted or not yet, and the wire bytes waiting in the BIO pair for OpenSSL.
    return SSL_has_pending(ssl) == 1 || BIO_ctrl_pending(SSL_get_rbio(ssl)) > 0;
}

}  // namespace politeproxy
