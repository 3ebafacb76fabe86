#pragma once
// A response's head as a message, whatever protocol carried it: what an origin transport
// hands the exchange and a client adapter frames in its own protocol.
#include "politeproxy/base/field.hpp"

#include <vector>

namespace politeproxy {

/// A final response's head (interim 1xx responses are the transports' own business).
struct response_head {
    unsigned status = 0;
    std::vector<field> fields;  ///< its end-to-end fields, in order, names in lower case
    bool end_stream = false;    ///< no body follows
};

}  // namespace politeproxy
