#pragma once
#include <boost/beast/http/fields.hpp>

#include <cstddef>
#include <memory>
#include <memory_resource>

namespace politeproxy {

/// Header fields of the messages a request forwards: the request and its response.
/// Their memory comes from the request's arena (see field_arena), so parsing and
/// rewriting a header costs no malloc per field.
using wire_allocator = std::pmr::polymorphic_allocator<char>;
using wire_fields = boost::beast::http::basic_fields<wire_allocator>;

/// Storage one client session reuses for the header fields of each request: a fixed
/// buffer, then the heap for headers larger than it. An arena made from it hands out
/// memory by bumping a pointer and frees everything at once when the request ends.
struct field_storage {
    static constexpr std::size_t size = 8 * 1024;
    std::unique_ptr<std::byte[]> bytes = std::make_unique<std::byte[]>(size);
};

/// The arena of one request; everything allocated from it must be gone before it is.
class field_arena {
public:
    explicit field_arena(field_storage& storage) : resource_(storage.bytes.get(), field_storage::size) {}
    field_arena(const field_arena&) = delete;
    field_arena& operator=(const field_arena&) = delete;

    wire_allocator allocator() { return wire_allocator(&resource_); }

private:
    std::pmr::monotonic_buffer_resource resource_;
};

}  // namespace politeproxy
