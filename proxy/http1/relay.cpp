#include "politeproxy/http1/relay.hpp"
#include "politeproxy/net/send_all.hpp"
#include "politeproxy/base/executor.hpp"

#include "politeproxy/http1/chunked_decoder.hpp"

#include <boost/asio/write.hpp>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstring>
#include <optional>
#include <span>
#include <tuple>
#include <vector>

namespace politeproxy {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

namespace {

constexpr std::string_view crlf = "\r\n";
constexpr std::string_view last_chunk = "0\r\n\r\n";
constexpr std::size_t coalesce_limit = 4096;

void append_version(unsigned version, std::string& out) {
    out += "HTTP/";
    out += static_cast<char>('0' + version / 10);
    out += '.';
    out += static_cast<char>('0' + version % 10);
}

// Sized once, then copied in: four appends per field would check capacity four times.
// (resize, not GCC 12's resize_and_overwrite: it hands the operation the capacity as
// the size.)
void append_fields(const wire_fields& fields, std::string_view added_fields, std::string& out) {
    std::size_t size = out.size() + added_fields.size() + crlf.size();
    for (const auto& f : fields) size += f.name_string().size() + f.value().size() + 4;
    const std::size_t start = out.size();
    out.resize(size);
    char* p = out.data() + start;
    const auto put = [&p](std::string_view s) { p = std::copy(s.begin(), s.end(), p); };
    for (const auto& f : fields) {
        put(f.name_string());
        put(": ");
        put(f.value());
        put(crlf);
    }
    put(added_fields);
    put(crlf);
}

constexpr std::size_t kept_per_thread = 256;

// Each worker runs on one thread: its sessions lend and give back on it, lock-free.
thread_local std::vector<std::unique_ptr<relay_buffers>> free_buffers;

}  // namespace

relay_buffers::loan relay_buffers::lend() {
    if (free_buffers.empty()) {
        auto fresh = std::make_unique<relay_buffers>();
        fresh->from_origin.reserve(read_room);
        return loan(fresh.release());
    }
    auto kept = std::move(free_buffers.back());
    free_buffers.pop_back();
    return loan(kept.release());
}

void relay_buffers::give_back::operator()(relay_buffers* b) const noexcept {
    std::unique_ptr<relay_buffers> owned(b);
    if (free_buffers.size() >= kept_per_thread) return;  // freed
    owned->from_origin.clear();
    try {
        free_buffers.push_back(std::move(owned));
    } catch (...) {  // out of memory: just free it
    }
}

std::size_t take_body(beast::flat_buffer& in_buffer, chunked_decoder* decoder, std::span<char> room) {
    if (!decoder) {
        const std::size_t n = std::min(in_buffer.size(), room.size());
        std::memcpy(room.data(), in_buffer.data().data(), n);
        in_buffer.consume(n);
        return n;
    }
    std::size_t got = 0;
    while (in_buffer.size() > 0 && got < room.size() && !decoder->done() && !decoder->failed()) {
        const auto data = in_buffer.data();
        const auto r = decoder->decode(std::string_view(static_cast<const char*>(data.data()), data.size()),
                                       room.subspan(got));
        in_buffer.consume(r.consumed);
        got += r.written;
    }
    return got;
}

void append_chunk(std::span<const char> data, bool last, std::string& out) {
    if (!data.empty()) {
        char size_line[sizeof(std::size_t) * 2];
        auto [end, ec] = std::to_chars(size_line, size_line + sizeof size_line, data.size(), 16);
        out.append(size_line, end).append(crlf).append(data.data(), data.size()).append(crlf);
    }
    if (last) out += last_chunk;
}

void serialize_head(const http::request_header<wire_fields>& header, std::string_view added_fields, std::string& out) {
    out += header.method_string();
    out += ' ';
    out += header.target();
    out += ' ';
    append_version(header.version(), out);
    out += crlf;
    append_fields(header, added_fields, out);
}

namespace {

// `parts` as one buffer when they are one, or small enough to copy together (see
// coalesce_limit): one send() costs the kernel less than a sendmsg() of several pieces
// (or even of one piece in a sequence), and copying a few KiB is cheaper still. Empty
// when they are big: they go out as they are.
std::optional<asio::const_buffer> as_one_buffer(std::span<const asio::const_buffer> parts, std::string& joined) {
    if (parts.size() == 1) return parts.front();
    if (asio::buffer_size(parts) > coalesce_limit) return std::nullopt;
    joined.clear();
    for (const auto& part : parts) joined.append(static_cast<const char*>(part.data()), part.size());
    return asio::buffer(joined);
}

// A body of known length (or none) needs no parsing:
// the header with the bytes already buffered (the header alone when none are, so a slow
// body does not hold it back), then reads straight into the body buffer, each written
// as it arrives, until `remaining` is 0. Bytes past the body (a pipelined request)
// stay in `in_buffer`.
task<relay_status> relay_counted(timed_socket& in, beast::flat_buffer& in_buffer, std::uint64_t remaining,
                                 timed_socket& out, clock::duration idle, relay_buffers& scratch) {
    const auto buffered = static_cast<std::size_t>(std::min<std::uint64_t>(in_buffer.size(), remaining));
    std::array<asio::const_buffer, 2> pieces{asio::buffer(scratch.head),
                                             asio::buffer(in_buffer.data().data(), buffered)};
    const std::span<const asio::const_buffer> first(pieces.data(), buffered > 0 ? 2 : 1);
    out.expires_after(idle);
    boost::system::error_code ec;
    if (const auto one = as_one_buffer(first, scratch.joined))
        std::tie(ec, std::ignore) = co_await send_all(out, *one);
    else
        std::tie(ec, std::ignore) = co_await send_all(out, first);
    if (ec) co_return relay_status{relay_end::write_failed, ec};
    in_buffer.consume(buffered);
    remaining -= buffered;
    while (remaining > 0) {
        const auto want = static_cast<std::size_t>(std::min<std::uint64_t>(remaining, relay_buffers::chunk_size));
        in.expires_after(idle);
        auto [rec, n] = co_await in.async_read_some(asio::buffer(scratch.body_buffer(), want), use_tuple);
        if (rec) co_return relay_status{relay_end::read_failed, rec};  // EOF here is a truncated body
        remaining -= n;
        out.expires_after(idle);
        if (auto [wec, wn] = co_await send_all(out, asio::buffer(scratch.body_buffer(), n)); wec)
            co_return relay_status{relay_end::write_failed, wec};
    }
    in.expires_never();
    out.expires_never();
    co_return relay_status{relay_end::done, {}};
}

// A chunked body (decoded, so its end is found and its framing checked) or one that
// ends when `in` closes: the bytes go out as they arrive, re-chunked when `out_chunked`.
task<relay_status> relay_delimited(timed_socket& in, beast::flat_buffer& in_buffer, bool chunked_in,
                                   bool out_chunked, timed_socket& out, clock::duration idle,
                                   relay_buffers& scratch) {
    std::optional<chunked_decoder> decoder;
    if (chunked_in) decoder.emplace();
    bool head_sent = false;
    if (in_buffer.size() == 0) {  // the body is not here yet: the header goes now
        out.expires_after(idle);
        if (auto [ec, n] = co_await send_all(out, asio::buffer(scratch.head)); ec)
            co_return relay_status{relay_end::write_failed, ec};
        head_sent = true;
    }
    const std::span<char> room(scratch.body_buffer(), relay_buffers::chunk_size);
    bool ended = false;
    for (;;) {
        const std::size_t got = take_body(in_buffer, decoder ? &*decoder : nullptr, room);
        if (decoder && decoder->failed()) co_return relay_status{relay_end::malformed, {}, decoder->error()};
        ended = ended || (decoder && decoder->done());
        if (got > 0 || ended || !head_sent) {
            std::array<asio::const_buffer, 5> pieces;
            std::size_t count = 0;
            if (!head_sent) pieces[count++] = asio::buffer(scratch.head);
            char size_line[sizeof(std::size_t) * 2 + 2];
            if (got > 0 && out_chunked) {
                auto [end, ec] = std::to_chars(size_line, size_line + sizeof size_line - 2, got, 16);
                *end++ = '\r';
                *end++ = '\n';
                pieces[count++] = asio::buffer(size_line, static_cast<std::size_t>(end - size_line));
            }
            if (got > 0) pieces[count++] = asio::buffer(room.data(), got);
            if (got > 0 && out_chunked) pieces[count++] = asio::buffer(crlf);
            if (ended && out_chunked) pieces[count++] = asio::buffer(last_chunk);
            const std::span<const asio::const_buffer> message_part(pieces.data(), count);
            out.expires_after(idle);
            boost::system::error_code wec;
            if (const auto one = as_one_buffer(message_part, scratch.joined))
                std::tie(wec, std::ignore) = co_await send_all(out, *one);
            else
                std::tie(wec, std::ignore) = co_await send_all(out, message_part);
            if (wec) co_return relay_status{relay_end::write_failed, wec};
            head_sent = true;
        }
        if (ended) break;
        if (in_buffer.size() > 0) continue;  // the room was full
        in.expires_after(idle);
        auto [rec, n] = co_await in.async_read_some(in_buffer.prepare(relay_buffers::read_room), use_tuple);
        if (rec == asio::error::eof && !decoder) {
            ended = true;  // the close is this body's end
            continue;
        }
        if (rec) co_return relay_status{relay_end::read_failed, rec};  // a chunked body cut short
        in_buffer.commit(n);
    }
    in.expires_never();
    out.expires_never();
    co_return relay_status{relay_end::done, {}};
}

}  // namespace

// Not a coroutine itself: it picks one, so a message costs one coroutine frame.
task<relay_status> relay(timed_socket& in, beast::flat_buffer& in_buffer, body_framing body, bool out_chunked,
                         timed_socket& out, clock::duration idle, relay_buffers& scratch) {
    if (body.kind == body_kind::none) return relay_counted(in, in_buffer, 0, out, idle, scratch);  // the header alone
    if (body.kind == body_kind::length) return relay_counted(in, in_buffer, body.length, out, idle, scratch);
    return relay_delimited(in, in_buffer, body.kind == body_kind::chunked, out_chunked, out, idle, scratch);
}

}  // namespace politeproxy
