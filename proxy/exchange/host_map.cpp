#include "politeproxy/exchange/host_map.hpp"

#include "politeproxy/base/huge_pages.hpp"
#include "politeproxy/base/keyed_hash.hpp"
#include "politeproxy/exchange/host_table.hpp"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <new>

namespace politeproxy {

namespace {
// At most 3/4 of the slots hold an entry or an erased mark: a lookup of a key not filed
// probes about 8.5 slots at that load, one that is filed about 2.5.
constexpr std::size_t max_load_num = 3, max_load_den = 4;
constexpr std::size_t min_capacity = 8;

// A host met cold (one of a million, or of a crawl's thousand among them) would cost a
// cache miss for each line of its entry as acquire and release reach it, and one for its
// key's characters after the line that points to them: asked for together, they arrive
// in about the time of one. gate_bench, host_gates at 1M hosts, ns per acquire + release
// as a ratio to its cost at 1k hosts (medians of 5 runs): all of them in round robin
// 1.69x -> 1.57x, shuffled 4.00x -> 2.77x; 1k used of them 1.48x -> 1.28x.
void prefetch(const host_entry* entry, const char* key_chars) {
    constexpr std::uintptr_t cache_line = 64;
    // The block's lines, from the one its counts begin on (the first of a block in
    // host_entry_blocks; any line of one made elsewhere, as by the tests).
    const std::uintptr_t begin = reinterpret_cast<std::uintptr_t>(entry) - host_entry_counts;
    const std::uintptr_t end = reinterpret_cast<std::uintptr_t>(entry) + sizeof(host_entry);
    for (std::uintptr_t line = begin & ~(cache_line - 1); line < end; line += cache_line)
        __builtin_prefetch(reinterpret_cast<const void*>(line));
    __builtin_prefetch(key_chars);
}
}  // namespace

namespace host_map_detail {

void* allocate(std::size_t bytes) {
    return bytes < huge_page_size ? ::operator new(bytes) : map_huge_pages(bytes);
}

void deallocate(void* p, std::size_t bytes) noexcept {
    if (bytes < huge_page_size) return ::operator delete(p, bytes);
    unmap_huge_pages(p, bytes);
}

}  // namespace host_map_detail

std::size_t host_map::hash_of(std::string_view key) { return keyed_hash(key); }

std::size_t host_map::home_in(std::size_t hash, std::size_t slot_count) {
    return home_at(hash, 64 - static_cast<unsigned>(std::countr_zero(slot_count)));
}

std::size_t host_map::home_at(std::size_t hash, unsigned shift) {
    // Fibonacci hashing: the top bits of the product depend on every bit of the hash (the
    // host table picks the shard by its low bits, which a shard's keys therefore share).
    constexpr std::uint64_t fibonacci = 0x9E3779B97F4A7C15ull;  // 2^64 / the golden ratio
    return static_cast<std::size_t>((static_cast<std::uint64_t>(hash) * fibonacci) >> shift);
}

std::size_t host_map::find_slot(std::string_view key, std::size_t hash) const {
    if (slots_.empty()) return 0;
    const std::size_t mask = slots_.size() - 1;
    for (std::size_t i = home(hash);; i = (i + 1) & mask) {
        const slot& s = slots_[i];
        if (!s.entry) {
            if (s.hash != erased) return slots_.size();  // never used: the probe ends
        } else if (s.hash == hash) {
            prefetch(s.entry.get(), s.key_chars);
            if (s.entry->key == key) return i;
        }
    }
}

const std::shared_ptr<host_entry>* host_map::find(std::string_view key, std::size_t hash) const {
    const std::size_t i = find_slot(key, hash);
    return i < slots_.size() ? &slots_[i].entry : nullptr;
}

void host_map::prefetch_home(std::size_t hash) const noexcept {
    const slot* slots = published_slots_.load(std::memory_order_relaxed);
    const unsigned shift = published_shift_.load(std::memory_order_relaxed);
    if (!slots || shift >= 64) return;
    // As an integer: the copies may be of two layouts, and the slot past the array's end.
    __builtin_prefetch(reinterpret_cast<const void*>(reinterpret_cast<std::uintptr_t>(slots) +
                                                     home_at(hash, shift) * sizeof(slot)));
}

void host_map::insert(std::shared_ptr<host_entry> entry) {
    const std::size_t hash = hash_of(entry->key);
    insert(std::move(entry), hash);
}

void host_map::insert(std::shared_ptr<host_entry> entry, std::size_t hash) {
    if ((size_ + erased_ + 1) * max_load_den > slots_.size() * max_load_num) {
        // Grow when live entries fill half the slots or more, else only clear the erased marks.
        std::size_t capacity = std::max(min_capacity, slots_.size());
        while ((size_ + 1) * 2 > capacity) capacity *= 2;
        rebuild(capacity);
    }
    const std::size_t mask = slots_.size() - 1;
    std::size_t i = home(hash);
    while (slots_[i].entry) i = (i + 1) & mask;  // the key is not here: the first free slot
    if (slots_[i].hash == erased) --erased_;
    const char* key_chars = entry->key.data();
    slots_[i] = slot{hash, std::move(entry), key_chars};
    ++size_;
}

std::shared_ptr<host_entry> host_map::extract(std::string_view key) {
    const std::size_t i = find_slot(key, hash_of(key));
    return i < slots_.size() ? extract_at(i) : nullptr;
}

std::shared_ptr<host_entry> host_map::extract_at(std::size_t i) {
    slot& s = slots_[i];
    if (!s.entry) return nullptr;
    s.hash = erased;
    s.key_chars = nullptr;
    --size_;
    ++erased_;
    return std::move(s.entry);
}

void host_map::shrink() noexcept {
    if (slots_.size() <= min_capacity || size_ * 8 >= slots_.size()) return;
    std::size_t capacity = min_capacity;
    while (size_ * 4 > capacity) capacity *= 2;  // room to grow by as many again before the next rebuild
    try {
        rebuild(capacity);
    } catch (const std::bad_alloc&) {  // fewer slots would be nice, not needed
    }
}

void host_map::rebuild(std::size_t capacity) {
    decltype(slots_) fresh(capacity);  // made first: if that throws, nothing changed
    const unsigned shift = 64 - static_cast<unsigned>(std::countr_zero(capacity));
    fresh.swap(slots_);
    shift_ = shift;
    const std::size_t mask = capacity - 1;
    for (slot& s : fresh) {  // the old slots, now
        if (!s.entry) continue;
        std::size_t i = home(s.hash);
        while (slots_[i].entry) i = (i + 1) & mask;
        slots_[i] = std::move(s);
    }
    erased_ = 0;
    ++layout_;
    published_slots_.store(slots_.data(), std::memory_order_relaxed);
    published_shift_.store(shift_, std::memory_order_relaxed);
}

}  // namespace politeproxy
