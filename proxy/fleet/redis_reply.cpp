#include "politeproxy/fleet/redis_reply.hpp"

#include <hiredis/hiredis.h>

#include <array>
#include <new>
#include <stdexcept>

namespace politeproxy::fleet {
namespace {

redis_reply copy_of(const redisReply& r) {
    redis_reply out;
    switch (r.type) {
    case REDIS_REPLY_STRING: out.type = redis_reply::kind::string; break;
    case REDIS_REPLY_ARRAY: out.type = redis_reply::kind::array; break;
    case REDIS_REPLY_INTEGER: out.type = redis_reply::kind::integer; break;
    case REDIS_REPLY_STATUS: out.type = redis_reply::kind::status; break;
    case REDIS_REPLY_ERROR: out.type = redis_reply::kind::error; break;
    default: out.type = redis_reply::kind::nil; break;
    }
    out.integer = r.integer;
    if (r.str) out.text.assign(r.str, r.len);
    out.elements.reserve(r.elements);
    for (std::size_t i = 0; i < r.elements; ++i) out.elements.push_back(copy_of(*r.element[i]));
    return out;
}

void free_reader(redisReader* r) { redisReaderFree(r); }

// hiredis 0.14 allocates an array's element table as soon as it reads `*N`: a store
// announcing a billion elements would make it allocate gigabytes. Its object functions
// can refuse (a null object is "out of memory" to the reader, which then fails): the
// reader here uses hiredis' own functions, with arrays bounded.
// Nested arrays are small (the scripts answer 6 figures; a CLUSTER SLOTS range holds a
// few nodes); the top level holds up to one range per cluster slot. A reply's bytes are
// bounded too, so the nested tables, 64 x 8 bytes each, stay bounded with them.
constexpr int most_elements = 64;
constexpr int most_top_level_elements = 16384;

const redisReplyObjectFunctions& hiredis_functions() {
    static const redisReplyObjectFunctions functions = [] {
        redisReader* r = redisReaderCreate();  // its functions are static in hiredis
        if (!r) throw std::bad_alloc();
        const redisReplyObjectFunctions copy = *r->fn;
        redisReaderFree(r);
        return copy;
    }();
    return functions;
}

void* bounded_array(const redisReadTask* task, int elements) {
    if (elements < 0 || elements > (task->parent ? most_elements : most_top_level_elements)) return nullptr;
    return hiredis_functions().createArray(task, elements);
}

redisReader* bounded_reader() {
    static redisReplyObjectFunctions functions = [] {
        redisReplyObjectFunctions f = hiredis_functions();
        f.createArray = &bounded_array;
        return f;
    }();
    redisReader* r = redisReaderCreateWithFunctions(&functions);
    if (!r) throw std::bad_alloc();
    return r;
}

template <class Range>
std::string format_command(const Range& args) {
    constexpr std::size_t most = 128;  // every command the proxy sends has fewer arguments
    std::array<const char*, most> argv;
    std::array<std::size_t, most> lengths;
    std::size_t n = 0;
    for (const std::string_view a : args) {
        if (n == most) throw std::length_error("redis_command: too many arguments");
        argv[n] = a.data();
        lengths[n] = a.size();
        ++n;
    }
    char* formatted = nullptr;
    const int size = redisFormatCommandArgv(&formatted, static_cast<int>(n), argv.data(), lengths.data());
    if (size < 0) throw std::bad_alloc();
    std::string out(formatted, static_cast<std::size_t>(size));
    redisFreeCommand(formatted);
    return out;
}

}  // namespace

std::string redis_command(std::initializer_list<std::string_view> args) { return format_command(args); }

std::string redis_command(const std::vector<std::string_view>& args) { return format_command(args); }

redis_reply_reader::redis_reply_reader(std::size_t max_reply)
    : max_reply_(max_reply), reader_(bounded_reader(), &free_reader) {}

redis_reply_reader::~redis_reply_reader() = default;

bool redis_reply_reader::feed(std::string_view bytes) {
    if (broken_) return false;
    // Bytes of replies not yet whole: what hiredis has parsed into objects so far counts
    // too (a deep array of large strings), not only the tail it still buffers.
    pending_ += bytes.size();
    if (redisReaderFeed(reader_.get(), bytes.data(), bytes.size()) != REDIS_OK || pending_ > max_reply_) broken_ = true;
    return !broken_;
}

redis_reply_reader::status redis_reply_reader::next(redis_reply& out) {
    if (broken_) return status::broken;
    void* r = nullptr;
    if (redisReaderGetReply(reader_.get(), &r) != REDIS_OK) {
        broken_ = true;
        return status::broken;
    }
    if (!r) return status::need_more;
    out = copy_of(*static_cast<redisReply*>(r));
    freeReplyObject(r);
    pending_ = reader_->len - reader_->pos;  // what follows belongs to the next replies
    return status::reply;
}

void redis_reply_reader::reset() {
    reader_.reset(bounded_reader());
    broken_ = false;
    pending_ = 0;
}

}  // namespace politeproxy::fleet
