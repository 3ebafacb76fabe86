#pragma once
#include "politeproxy/base/clock.hpp"
#include "politeproxy/http1/wire_fields.hpp"

#include "politeproxy/base/executor.hpp"
#include "politeproxy/http1/framing.hpp"
#include "politeproxy/net/timed_socket.hpp"

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/system/error_code.hpp>

#include <memory>
#include <span>
#include <string>

namespace politeproxy {

/// Scratch space for relaying one request and its response: 16 KiB of read room, and a
/// 64 KiB body buffer once a body has to be streamed (one that came with its header
/// does not). Lent by the worker thread for as long as the request is forwarded (see
/// lend()), so an idle or parked client connection holds none, and a busy one
/// allocates none.
struct relay_buffers {
    /// Body bytes read at once: large bodies cost a few big reads and writes, not many
    /// small ones (the kernel's cost is per call and per segment more than per byte).
    static constexpr std::size_t chunk_size = 64 * 1024;
    /// Room a parser's read buffer gets: a header and a small body in one read.
    static constexpr std::size_t read_room = 16 * 1024;

    struct give_back {
        void operator()(relay_buffers* b) const noexcept;
    };
    using loan = std::unique_ptr<relay_buffers, give_back>;

    /// Buffers from this thread's free list, or new ones. The list keeps up to 256 sets
    /// given back (enough for that many requests at once without a malloc).
    static loan lend();

    /// The body buffer (chunk_size bytes), allocated on first use.
    char* body_buffer() {
        if (!chunk) chunk = std::make_unique_for_overwrite<char[]>(chunk_size);
        return chunk.get();
    }

    std::string head;    ///< the outgoing start line and header fields
    std::string joined;  ///< small message parts copied together for one write
    std::string added;     ///< fields the proxy adds to a response
    std::string pool_key;  ///< the origin's key in the connection pool ("host:port")
    std::unique_ptr<char[]> chunk;  ///< body bytes in transit; see body_buffer()
    boost::beast::flat_buffer from_origin;  ///< what was read from the origin and not yet parsed
};

enum class relay_end {
    done,          ///< the whole message went through
    read_failed,   ///< reading `in` failed (closed early, reset, timed out)
    write_failed,  ///< writing `out` failed
    malformed,     ///< the body's chunked coding is broken (see relay_status::details)
};

struct relay_status {
    relay_end end;
    boost::system::error_code ec;
    const char* details = nullptr;  ///< why a body is malformed
};

/// Streams one HTTP/1.1 message from `in` to `out` a chunk at a time, never holding
/// the whole body: first the header the caller wrote into `scratch.head` (together with
/// the first body bytes when they are already buffered; at once otherwise, so a slow
/// body does not hold it back), then the body, read as `body` says. A body of known
/// length goes out as it is; a chunked one or one that ends at the close goes out
/// chunked when `out_chunked`, else raw (the client is told it ends at the close). A chunked body is decoded strictly (chunked_decoder) and
/// re-chunked from its data alone; a body of known length passes through without
/// parsing. Bytes past the message (a pipelined request) stay in `in_buffer`.
task<relay_status> relay(timed_socket& in, boost::beast::flat_buffer& in_buffer, body_framing body, bool out_chunked,
                         timed_socket& out, clock::duration idle, relay_buffers& scratch);

class chunked_decoder;

/// Moves what `in_buffer` holds of a body into `room`: decoded when `decoder` is given
/// (a chunked body), as it is otherwise. Returns the bytes moved; a decoding failure is
/// the decoder's to tell.
std::size_t take_body(boost::beast::flat_buffer& in_buffer, chunked_decoder* decoder, std::span<char> room);

/// Appends one field line, "name: value\r\n" (the caller checked both).
inline void append_field_line(std::string_view name, std::string_view value, std::string& out) {
    out.append(name).append(": ").append(value).append("\r\n");
}

/// Appends `data` as one chunk of a chunked body (nothing when empty), then the last
/// chunk and the end of the message when `last`.
void append_chunk(std::span<const char> data, bool last, std::string& out);

/// Appends `header` as it goes on the wire: start line, fields, `added_fields`, empty line.
void serialize_head(const boost::beast::http::request_header<wire_fields>& header, std::string_view added_fields,
                    std::string& out);

}  // namespace politeproxy
