#pragma once
// Blocks of one size carved from chunks of whole 2 MiB huge pages (transparent huge
// pages, madvise mode: Debian's default), for objects held by the million whose state a
// request meets cold: the host entries. From the heap (tcmalloc) they lie on 4 KiB pages,
// and each one met at random among a million also missed the TLB: a page walk before the
// cache miss (gate_bench, tests/bench/README.md). A chunk is mapped apart and unmapped
// once none of its blocks is held; what a few held blocks keep of a chunk otherwise is
// given back page by page by release_free_pages.
//
// Thread-safe (one lock: a block is taken once per new host, given back once per
// forgotten one). In a sanitizer build every block comes from the heap, for the
// sanitizer to see.
#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

namespace politeproxy {

class block_arena {
public:
    static constexpr std::size_t chunk_size = std::size_t{2} << 20;  ///< one huge page

    /// Blocks of `block_size` bytes (rounded up to whole cache lines; at least two a chunk).
    explicit block_arena(std::size_t block_size);
    ~block_arena();
    block_arena(const block_arena&) = delete;
    block_arena& operator=(const block_arena&) = delete;

    /// A block (std::bad_alloc when no chunk can be mapped).
    void* allocate();
    /// Gives back a block from allocate(); the last of a chunk unmaps it (one emptied
    /// chunk is kept for the next block, so one host made and forgotten at a chunk's
    /// edge maps none).
    void deallocate(void* block) noexcept;
    /// Gives back to the system the free 4 KiB pages of chunks less than an eighth held:
    /// what hosts kept among forgotten ones would hold of their chunks otherwise (a chunk
    /// goes as a whole only once all of its blocks are free). Such a chunk stays on 4 KiB
    /// pages until it is emptied (a huge page again would bring its free pages back), and
    /// its pages fault in again, zeroed, as their blocks are taken. For after an eviction
    /// pass, off the event loops: a chunk at a time, its system calls outside the lock.
    void release_free_pages() noexcept;

    /// False in a sanitizer build: every block is then the heap's.
    static bool in_chunks();
    std::size_t block_size() const { return block_size_; }
    std::size_t blocks_per_chunk() const { return blocks_per_chunk_; }
    /// Chunks mapped, the kept empty one included (for tests and benches).
    std::size_t chunks() const;

private:
    struct chunk;
    void link(chunk& c) noexcept;
    void unlink(chunk& c) noexcept;
    /// After blocks of `c` went back: lists it when it has room; when it is empty, keeps it
    /// as the spare or returns it, out of mapped_, for the caller to unmap after the lock.
    chunk* freed(chunk& c) noexcept;

    const std::size_t block_size_;
    const std::size_t blocks_per_chunk_;
    mutable std::mutex mutex_;
    chunk* with_room_ = nullptr;  ///< chunks with a free block, each once
    chunk* spare_ = nullptr;      ///< an emptied chunk kept mapped
    std::vector<chunk*> mapped_;  ///< every chunk mapped (the spare too)
};

/// An allocator over one block_arena, for std::allocate_shared of objects that fit a
/// block (the shared_ptr's counts and the object: one block).
template <class T, block_arena& (*Arena)()>
struct arena_allocator {
    using value_type = T;
    template <class U>
    struct rebind {
        using other = arena_allocator<U, Arena>;
    };
    arena_allocator() = default;
    template <class U>
    arena_allocator(const arena_allocator<U, Arena>&) {}

    T* allocate(std::size_t n) {
        if (n != 1 || sizeof(T) > Arena().block_size()) return std::allocator<T>().allocate(n);
        return static_cast<T*>(Arena().allocate());
    }
    void deallocate(T* p, std::size_t n) noexcept {
        if (n != 1 || sizeof(T) > Arena().block_size()) return std::allocator<T>().deallocate(p, n);
        Arena().deallocate(p);
    }
    template <class U>
    bool operator==(const arena_allocator<U, Arena>&) const { return true; }
};

}  // namespace politeproxy
