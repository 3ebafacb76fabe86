// block_arena: blocks of one size in chunks of huge pages, given back chunk by chunk and
// page by page. The chunk cases read the arena's own chunks; in a sanitizer build the
// blocks come from the heap (block_arena::in_chunks), and only the block cases run.
#include "politeproxy/base/block_arena.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

using namespace politeproxy;

namespace {

constexpr std::size_t entry_size = 704;

// Whether the 4 KiB page holding `p` is in memory (mincore).
bool resident(const void* p) {
    const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
    unsigned char in = 0;
    REQUIRE(mincore(reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(p) & ~(page - 1)), page, &in) == 0);
    return in & 1;
}

void fill(void* block, std::size_t size, unsigned char with) { std::memset(block, with, size); }
bool filled(const void* block, std::size_t size, unsigned char with) {
    const auto* b = static_cast<const unsigned char*>(block);
    return std::all_of(b, b + size, [&](unsigned char c) { return c == with; });
}

// `n` blocks taken from `arena`, each filled with `mark`.
std::vector<void*> take_filled(block_arena& arena, std::size_t n, unsigned char mark) {
    std::vector<void*> blocks;
    for (std::size_t i = 0; i < n; ++i) {
        blocks.push_back(arena.allocate());
        fill(blocks.back(), entry_size, mark);
    }
    return blocks;
}

}  // namespace

TEST_CASE("blocks are whole cache lines, apart, and each keeps what is written to it") {
    block_arena arena(entry_size - 10);
    CHECK(arena.block_size() == entry_size);
    std::vector<void*> blocks;
    for (std::size_t i = 0; i < 3 * arena.blocks_per_chunk() + 5; ++i) {
        blocks.push_back(arena.allocate());
        CHECK(reinterpret_cast<std::uintptr_t>(blocks.back()) % 64 == 0);
        fill(blocks.back(), entry_size, static_cast<unsigned char>(i));
    }
    std::vector<void*> sorted = blocks;
    std::sort(sorted.begin(), sorted.end());
    for (std::size_t i = 1; i < sorted.size(); ++i)
        CHECK(static_cast<char*>(sorted[i]) - static_cast<char*>(sorted[i - 1]) >= static_cast<std::ptrdiff_t>(entry_size));
    for (std::size_t i = 0; i < blocks.size(); ++i) CHECK(filled(blocks[i], entry_size, static_cast<unsigned char>(i)));
    for (void* b : blocks) arena.deallocate(b);
}

TEST_CASE("a chunk fills before the next is mapped, and the emptied ones go but one") {
    block_arena arena(entry_size);
    if (!block_arena::in_chunks()) return;
    CHECK(arena.blocks_per_chunk() == 2978);  // (2 MiB - a header of 448 bytes) / 704
    std::vector<void*> blocks;
    for (std::size_t i = 0; i < arena.blocks_per_chunk(); ++i) blocks.push_back(arena.allocate());
    CHECK(arena.chunks() == 1);
    for (std::size_t i = 0; i < arena.blocks_per_chunk(); ++i) blocks.push_back(arena.allocate());
    CHECK(arena.chunks() == 2);  // two chunks, both full
    blocks.push_back(arena.allocate());
    CHECK(arena.chunks() == 3);
    // The same chunk for every block of a run: a chunk is one aligned huge page.
    const auto chunk_of = [](void* p) { return reinterpret_cast<std::uintptr_t>(p) & ~(block_arena::chunk_size - 1); };
    CHECK(chunk_of(blocks.front()) == chunk_of(blocks[arena.blocks_per_chunk() - 1]));
    CHECK(chunk_of(blocks.front()) != chunk_of(blocks[arena.blocks_per_chunk()]));

    // A freed block is the next one handed out.
    void* again = blocks[17];
    arena.deallocate(again);
    CHECK(arena.allocate() == again);

    for (std::size_t i = 0; i < arena.blocks_per_chunk(); ++i) arena.deallocate(blocks[i]);
    CHECK(arena.chunks() == 3);  // the first emptied chunk is kept
    for (std::size_t i = arena.blocks_per_chunk(); i < 2 * arena.blocks_per_chunk(); ++i) arena.deallocate(blocks[i]);
    CHECK(arena.chunks() == 2);  // the second is unmapped
    // A chunk with room serves before the kept one.
    void* held = blocks.back();
    void* next = arena.allocate();
    CHECK(chunk_of(next) == chunk_of(held));
    arena.deallocate(next);
    arena.deallocate(held);
    CHECK(arena.chunks() == 1);  // the kept one
    // The kept chunk serves a whole chunk's blocks before another is mapped.
    const std::vector<void*> taken = take_filled(arena, arena.blocks_per_chunk(), 0x5A);
    const std::set<void*> whole(taken.begin(), taken.end());
    CHECK(whole.size() == arena.blocks_per_chunk());
    CHECK(arena.chunks() == 1);
    for (void* b : whole) arena.deallocate(b);
}

TEST_CASE("release_free_pages gives back the free pages of a chunk few blocks hold, and only those") {
    block_arena arena(entry_size);
    if (!block_arena::in_chunks()) return;
    const std::vector<void*> blocks = take_filled(arena, arena.blocks_per_chunk(), 0xAB);
    // Keep every 100th block: each pins the one or two pages it lies on.
    std::vector<void*> kept;
    for (std::size_t i = 0; i < blocks.size(); ++i) {
        if (i % 100 == 0) kept.push_back(blocks[i]);
        else arena.deallocate(blocks[i]);
    }
    for (void* b : blocks) CHECK(resident(b));

    arena.release_free_pages();
    std::size_t gone = 0;
    for (std::size_t i = 0; i < blocks.size(); ++i) {
        if (i % 100 == 0) {
            CHECK(resident(blocks[i]));
            CHECK(filled(blocks[i], entry_size, 0xAB));
        } else if (!resident(blocks[i])) {
            ++gone;
        }
    }
    CHECK(gone > blocks.size() * 8 / 10);  // a kept block pins ~1.2 of 512 pages' 5.8 blocks each
    CHECK(!resident(blocks.back()));       // the last page too
    CHECK(!resident(blocks[7]));           // the first page after the header's (blocks 5-10)

    // A block on a page given back is handed out again, and holds what is written to it.
    const std::vector<void*> again = take_filled(arena, blocks.size() - kept.size(), 0xCD);
    CHECK(arena.chunks() == 1);
    for (void* b : again) CHECK(filled(b, entry_size, 0xCD));
    for (void* b : kept) CHECK(filled(b, entry_size, 0xAB));
    for (void* b : again) arena.deallocate(b);
    for (void* b : kept) arena.deallocate(b);
    CHECK(arena.chunks() == 0);  // a chunk given back in part is not kept once empty
}

TEST_CASE("a chunk an eighth held or more keeps its pages; the kept empty chunk goes") {
    block_arena arena(entry_size);
    if (!block_arena::in_chunks()) return;
    const std::vector<void*> blocks = take_filled(arena, arena.blocks_per_chunk(), 0xAB);
    const std::size_t keep = arena.blocks_per_chunk() / 8 + 1;
    for (std::size_t i = keep; i < blocks.size(); ++i) arena.deallocate(blocks[i]);
    arena.release_free_pages();
    for (void* b : blocks) CHECK(resident(b));
    for (std::size_t i = 0; i < keep; ++i) arena.deallocate(blocks[i]);
    CHECK(arena.chunks() == 1);  // kept, empty
    arena.release_free_pages();
    CHECK(arena.chunks() == 0);
}

TEST_CASE("two threads taking and giving back blocks never share one, pages given back meanwhile") {
    block_arena arena(entry_size);
    std::atomic<bool> done{false};
    const auto churn = [&](unsigned seed, unsigned char mark) {
        std::minstd_rand random(seed);
        std::vector<void*> held;
        for (int step = 0; step < 200000; ++step) {
            // Up to ~6000 blocks (two chunks), then down to a few: chunks come and go.
            const bool take = held.empty() || (step / 20000 % 2 == 0 ? random() % 5 < 3 : random() % 5 < 1);
            if (take) {
                held.push_back(arena.allocate());
                fill(held.back(), entry_size, mark);
            } else {
                const std::size_t i = random() % held.size();
                REQUIRE(filled(held[i], entry_size, mark));  // nobody else wrote to it, no page of it went
                arena.deallocate(held[i]);
                held[i] = held.back();
                held.pop_back();
            }
        }
        for (void* b : held) arena.deallocate(b);
    };
    std::thread other(churn, 1, 0x11);
    std::thread releaser([&] {
        while (!done.load()) arena.release_free_pages();
    });
    churn(2, 0x22);
    other.join();
    done = true;
    releaser.join();
    if (block_arena::in_chunks()) CHECK(arena.chunks() <= 1);
}

namespace {
block_arena& test_blocks() {
    static block_arena& blocks = *new block_arena(entry_size);
    return blocks;
}
struct small {
    std::uint64_t words[10];
};
struct large {
    std::uint64_t words[200];
};
}  // namespace

TEST_CASE("arena_allocator: shared objects that fit a block are made in one, larger ones on the heap") {
    const std::size_t before = test_blocks().chunks();
    auto a = std::allocate_shared<small>(arena_allocator<small, test_blocks>{});
    auto b = std::allocate_shared<large>(arena_allocator<large, test_blocks>{});
    a->words[9] = 9;
    b->words[199] = 199;
    if (!block_arena::in_chunks()) return;
    CHECK(test_blocks().chunks() == before + 1);  // a's chunk; b came from the heap
    // The shared_ptr's counts, then the object, from the block's start (host_map's prefetch).
    const auto block = reinterpret_cast<std::uintptr_t>(a.get()) - 16;
    CHECK(block % 64 == 0);
    a.reset();
    CHECK(reinterpret_cast<std::uintptr_t>(test_blocks().allocate()) == block);  // a's block went back
}
