#pragma once
// Whose request it is (clients.identify_by, SPEC.md), for every request source: a plain
// HTTP/1.1 request, a CONNECT and what runs inside its intercepted TLS, an HTTP/2 stream.
#include "politeproxy/base/clock.hpp"
#include "politeproxy/base/field.hpp"
#include "politeproxy/config/config.hpp"
#include "politeproxy/http1/wire_fields.hpp"

#include <boost/asio/ip/address.hpp>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace politeproxy {

class client_book;
class client_state;

/// What the entry knows of a request that identifies its client.
struct client_facts {
    std::string_view user;    ///< the proxy user its credentials (or its CONNECT's) named; empty: none
    std::string_view peer;    ///< the client's address, as address_text() spells it
    int header_fields = 0;    ///< identify_by header: how many such fields it carried
    std::string_view header{};  ///< ... and the value of the last one
    std::string_view outer;   ///< inside intercepted TLS: the CONNECT's client; empty otherwise
};

/// The client's name under `c`: the user, the address, or the header's value (one field,
/// its value trimmed, 1 to 64 bytes of letters, digits and `-._~!#$%&'*+^`|:/@=`, not
/// starting with `_`, the metrics' own: client="_other"); else
/// the CONNECT's client (inside intercepted TLS: its user, its header) or anonymous. A header that does not
/// qualify is not an error: the request is anonymous's, and the header is stripped anyway.
std::string client_name(const clients_config& c, const client_facts& facts);

/// Whose request it is: `c`'s client in `book` for a request with `facts`, whose header
/// fields (`fields`: an HTTP/1.1 header or an HTTP/2 stream's) give the identify_by
/// header, which is then taken out of them (never forwarded).
std::shared_ptr<client_state> identify_client(client_book& book, const clients_config& c, client_facts facts,
                                              wire_fields& fields, clock::time_point now);
std::shared_ptr<client_state> identify_client(client_book& book, const clients_config& c, client_facts facts,
                                              std::vector<field>& fields, clock::time_point now);

/// An address as a client name: IPv4-mapped IPv6 as IPv4, IPv6 without brackets.
std::string address_text(const boost::asio::ip::address& a);

}  // namespace politeproxy
