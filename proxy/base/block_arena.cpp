#include "politeproxy/base/block_arena.hpp"

#include "politeproxy/base/huge_pages.hpp"

#include <algorithm>
#include <bit>
#include <cassert>
#include <cstdint>
#include <new>
#include <stdexcept>
#include <utility>

#include <sys/mman.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define POLITEPROXY_ARENA_ON_HEAP 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define POLITEPROXY_ARENA_ON_HEAP 1
#endif
#endif

namespace politeproxy {

namespace {
constexpr std::size_t cache_line = 64;
constexpr std::size_t page = 4096;  // release_free_pages gives back nothing where pages are larger

constexpr std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }
std::size_t bit_words(std::size_t blocks) { return (blocks + 63) / 64; }
// A line for the chunk's fields, then its bits, in whole lines.
std::size_t header_bytes(std::size_t blocks) { return cache_line + round_up(bit_words(blocks) * 8, cache_line); }
}  // namespace

// A chunk begins with this, then a bit per block (set: held), then the blocks. The bits,
// not a free list through the blocks, say which are free: a free block's page may have
// been given back (its bytes read as zeros).
struct block_arena::chunk {
    chunk* next = nullptr;  ///< in with_room_
    chunk* prev = nullptr;
    bool listed = false;    ///< in with_room_: neither full nor the spare
    bool released = false;  ///< pages given back: on 4 KiB pages from then on (see release_free_pages)
    std::size_t held = 0;
    std::size_t first_word_with_room = 0;  ///< no free block in the words before it

    std::uint64_t* bits() { return reinterpret_cast<std::uint64_t*>(reinterpret_cast<char*>(this) + cache_line); }
    bool is_held(std::size_t b) { return bits()[b / 64] >> (b % 64) & 1; }
    void set(std::size_t b) { bits()[b / 64] |= std::uint64_t{1} << (b % 64); }
    void clear(std::size_t b) {
        bits()[b / 64] &= ~(std::uint64_t{1} << (b % 64));
        first_word_with_room = std::min(first_word_with_room, b / 64);
    }
};
static_assert(block_arena::chunk_size == huge_page_size);

block_arena::block_arena(std::size_t block_size)
    : block_size_(round_up(block_size, cache_line)), blocks_per_chunk_([&] {
          // As many blocks as fit beside the header their bits make.
          std::size_t n = chunk_size / block_size_;
          while (n > 0 && header_bytes(n) + n * block_size_ > chunk_size) --n;
          return n;
      }()) {
    static_assert(sizeof(chunk) <= cache_line);
    if (block_size == 0 || blocks_per_chunk_ < 2) throw std::invalid_argument("block_arena: block size");
}

block_arena::~block_arena() {
    // Only a test's arena is destroyed (host_entry_blocks lives as long as the process),
    // after every block went back: only the spare is left.
    if (spare_) unmap_huge_pages(spare_, chunk_size);
}

bool block_arena::in_chunks() {
#ifdef POLITEPROXY_ARENA_ON_HEAP
    return false;
#else
    return true;
#endif
}

std::size_t block_arena::chunks() const {
    std::lock_guard lock(mutex_);
    return mapped_.size();
}

void block_arena::link(chunk& c) noexcept {
    c.next = with_room_;
    c.prev = nullptr;
    if (with_room_) with_room_->prev = &c;
    with_room_ = &c;
    c.listed = true;
}

void block_arena::unlink(chunk& c) noexcept {
    (c.prev ? c.prev->next : with_room_) = c.next;
    if (c.next) c.next->prev = c.prev;
    c.next = c.prev = nullptr;
    c.listed = false;
}

block_arena::chunk* block_arena::freed(chunk& c) noexcept {
    if (!c.listed && c.held < blocks_per_chunk_) link(c);
    if (c.held > 0) return nullptr;
    unlink(c);
    if (!spare_ && !c.released) {  // a released one would stay on 4 KiB pages
        spare_ = &c;
        return nullptr;
    }
    const auto at = std::find(mapped_.begin(), mapped_.end(), &c);
    assert(at != mapped_.end());
    *at = mapped_.back();
    mapped_.pop_back();
    return &c;
}

void* block_arena::allocate() {
#ifdef POLITEPROXY_ARENA_ON_HEAP
    return ::operator new(block_size_, std::align_val_t{cache_line});
#else
    std::unique_lock lock(mutex_);
    if (!with_room_ && spare_) link(*std::exchange(spare_, nullptr));
    if (!with_room_) {
        lock.unlock();  // mapping (and later faulting in) a huge page can take a while
        auto* fresh = new (map_huge_pages(chunk_size)) chunk;  // zeroed: every block free
        lock.lock();
        try {
            mapped_.push_back(fresh);
        } catch (...) {
            unmap_huge_pages(fresh, chunk_size);
            throw;
        }
        link(*fresh);
    }
    chunk& c = *with_room_;
    std::uint64_t* bits = c.bits();
    std::size_t w = c.first_word_with_room;
    while (bits[w] == ~std::uint64_t{0}) ++w;  // a listed chunk has a free block
    const std::size_t i = w * 64 + static_cast<std::size_t>(std::countr_one(bits[w]));
    c.set(i);
    c.first_word_with_room = w;
    if (++c.held == blocks_per_chunk_) unlink(c);
    return reinterpret_cast<char*>(&c) + header_bytes(blocks_per_chunk_) + i * block_size_;
#endif
}

void block_arena::deallocate(void* block) noexcept {
#ifdef POLITEPROXY_ARENA_ON_HEAP
    ::operator delete(block, std::align_val_t{cache_line});
#else
    auto* c = reinterpret_cast<chunk*>(reinterpret_cast<std::uintptr_t>(block) & ~(chunk_size - 1));
    const auto offset = static_cast<std::size_t>(static_cast<char*>(block) - reinterpret_cast<char*>(c));
    const std::size_t i = (offset - header_bytes(blocks_per_chunk_)) / block_size_;
    chunk* unmap = nullptr;
    {
        std::lock_guard lock(mutex_);
        assert(c->is_held(i));
        c->clear(i);
        --c->held;
        unmap = freed(*c);
    }
    if (unmap) unmap_huge_pages(unmap, chunk_size);  // outside the lock: tens of µs
#endif
}

void block_arena::release_free_pages() noexcept {
#ifndef POLITEPROXY_ARENA_ON_HEAP
    if (sysconf(_SC_PAGESIZE) != static_cast<long>(page)) return;
    const std::size_t header = header_bytes(blocks_per_chunk_);
    const std::size_t first_page = round_up(header, page) / page, pages = chunk_size / page;
    std::vector<std::size_t> taken;  // blocks on the pages given back, held meanwhile
    for (std::size_t i = 0;; ++i) {
        chunk* c = nullptr;
        std::vector<std::pair<std::size_t, std::size_t>> runs;  // [first page, end page)
        {
            std::lock_guard lock(mutex_);
            if (i >= mapped_.size()) return;
            c = mapped_[i];
            if (c->held * 8 >= blocks_per_chunk_) continue;
            // Pages every block of which is free, in runs; their blocks marked held (each
            // once) so that none is handed out while its page goes, nor the chunk unmapped.
            taken.clear();
            for (std::size_t p = first_page; p < pages; ++p) {
                const std::size_t first = (p * page - header) / block_size_;
                const std::size_t last = std::min(((p + 1) * page - 1 - header) / block_size_, blocks_per_chunk_ - 1);
                bool free = true;
                for (std::size_t b = first; free && b <= last; ++b)  // the first may be taken: it began on p - 1
                    free = !c->is_held(b) || (!taken.empty() && taken.back() == b);
                if (!free) continue;
                for (std::size_t b = first; b <= last; ++b)
                    if (!c->is_held(b)) {
                        c->set(b);
                        taken.push_back(b);
                    }
                if (!runs.empty() && runs.back().second == p) ++runs.back().second;
                else runs.emplace_back(p, p + 1);
            }
            if (runs.empty()) continue;
            c->held += taken.size();
            if (c->listed && c->held == blocks_per_chunk_) unlink(*c);
            if (c == spare_) spare_ = nullptr;  // it has "held" blocks now: freed() decides again
            c->released = true;
        }
        // The kernel would make the chunk a huge page again (khugepaged), pages given back
        // and all: it stays on 4 KiB pages until emptied and unmapped.
        auto* base = reinterpret_cast<char*>(c);
        madvise(base, chunk_size, MADV_NOHUGEPAGE);
        for (const auto& [from, to] : runs) madvise(base + from * page, (to - from) * page, MADV_DONTNEED);
        chunk* unmap = nullptr;
        {
            std::lock_guard lock(mutex_);
            for (const std::size_t b : taken) c->clear(b);
            c->held -= taken.size();
            unmap = freed(*c);
        }
        if (unmap) {
            unmap_huge_pages(unmap, chunk_size);
            --i;  // another chunk took its place in mapped_
        }
    }
#endif
}

}  // namespace politeproxy
