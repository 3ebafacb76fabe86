#pragma once
// The Redis protocol (RESP), sans-io: commands formatted and replies parsed by hiredis,
// replies copied out into plain values. The connection (redis_connection) does the I/O.
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

struct redisReader;

namespace politeproxy::fleet {

/// One Redis reply, copied out of hiredis' reader.
struct redis_reply {
    enum class kind : std::uint8_t { nil, string, array, integer, status, error };
    kind type = kind::nil;
    long long integer = 0;
    std::string text;  ///< string, status or error
    std::vector<redis_reply> elements;

    bool is_error() const { return type == kind::error; }
};

/// One command in the Redis protocol, formatted by hiredis from its arguments.
std::string redis_command(std::initializer_list<std::string_view> args);
std::string redis_command(const std::vector<std::string_view>& args);

/// Reads replies from the bytes a store sends. The store is not trusted to be sane:
/// anything unparseable, nesting deeper than hiredis allows, a nested array of more than
/// 64 elements or a top-level one of more than 16384 (CLUSTER SLOTS: a range per slot at
/// most), or one reply larger than `max_reply` bytes (a bulk string announced as a
/// gigabyte, or nested arrays of large strings) makes the reader broken, and the
/// connection is dropped. hiredis 0.14 has none of these bounds but the nesting.
class redis_reply_reader {
public:
    static constexpr std::size_t default_max_reply = 1 << 20;

    explicit redis_reply_reader(std::size_t max_reply = default_max_reply);
    ~redis_reply_reader();
    redis_reply_reader(const redis_reply_reader&) = delete;
    redis_reply_reader& operator=(const redis_reply_reader&) = delete;

    enum class status : std::uint8_t { reply, need_more, broken };

    /// Adds bytes read from the store; false when the reader is broken.
    bool feed(std::string_view bytes);
    /// The next whole reply into `out` (reply), none yet (need_more), or broken.
    status next(redis_reply& out);
    /// Forgets everything buffered (a new connection).
    void reset();

private:
    std::size_t max_reply_;
    std::size_t pending_ = 0;  ///< bytes fed since the last whole reply
    std::unique_ptr<redisReader, void (*)(redisReader*)> reader_;
    bool broken_ = false;
};

}  // namespace politeproxy::fleet
