#include "politeproxy/http1/read_header.hpp"
#include "politeproxy/base/executor.hpp"
#include "politeproxy/http1/origin_response.hpp"

#include <boost/beast/http/error.hpp>

#include <algorithm>

namespace politeproxy {
namespace asio = boost::asio;
namespace http = boost::beast::http;

namespace {

// Beast's sizing: the buffer's free room, at least 512 bytes, at most 64 KiB.
constexpr std::size_t least_read = 512;
constexpr std::size_t most_read = 64 * 1024;

// Parser: Beast's basic_parser<true>, or origin_response_parser (the same contract).
template <class Parser>
task<boost::system::error_code> read_header_with(timed_socket& in, boost::beast::flat_buffer& buffer, Parser& parser) {
    boost::system::error_code ec;
    for (;;) {
        if (buffer.size() > 0) {
            buffer.consume(parser.put(buffer.data(), ec));
            if (ec == http::error::need_more)
                ec = {};
            else if (ec || parser.is_header_done())
                co_return ec;
        }
        const std::size_t room = std::clamp(buffer.capacity() - buffer.size(), least_read, most_read);
        auto [rec, n] = co_await in.async_read_some(buffer.prepare(room), use_tuple);
        if (rec == asio::error::eof) {
            if (!parser.got_some()) co_return http::error::end_of_stream;
            parser.put_eof(ec);  // partial_message: the header was cut short
            co_return ec ? ec : http::error::partial_message;
        }
        if (rec) co_return rec;
        buffer.commit(n);
    }
}

}  // namespace

task<boost::system::error_code> read_header(timed_socket& in, boost::beast::flat_buffer& buffer,
                                            http::basic_parser<true>& parser) {
    return read_header_with(in, buffer, parser);
}

task<boost::system::error_code> read_header(timed_socket& in, boost::beast::flat_buffer& buffer,
                                            origin_response_parser& parser) {
    return read_header_with(in, buffer, parser);
}

}  // namespace politeproxy
