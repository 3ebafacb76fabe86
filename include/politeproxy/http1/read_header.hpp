#pragma once
#include "politeproxy/net/timed_socket.hpp"

#include "politeproxy/base/executor.hpp"
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/basic_parser.hpp>
#include <boost/system/error_code.hpp>

namespace politeproxy {

class origin_response_parser;

/// Reads from `in` until `parser` holds a whole message header, as
/// beast::http::async_read_header does and with its errors (end_of_stream when the peer
/// closed before sending a byte, partial_message when it closed mid-header,
/// header_limit, the parser's syntax errors, the socket's errors), but as one loop of
/// plain reads rather than three layers of composed operations. Bytes read past the
/// header stay in `buffer`, unparsed.
task<boost::system::error_code> read_header(timed_socket& in, boost::beast::flat_buffer& buffer,
                                            boost::beast::http::basic_parser<true>& parser);

/// The same for an origin's response header.
task<boost::system::error_code> read_header(timed_socket& in, boost::beast::flat_buffer& buffer,
                                            origin_response_parser& parser);

}  // namespace politeproxy
