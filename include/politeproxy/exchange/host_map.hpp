#pragma once
// One shard's host entries by key: an open-addressing table (linear probing) of
// {hash, entry, key's characters} slots. std::unordered_map took a 48-byte node and a
// bucket per host, and a lookup read the bucket, then the node, then the key, then the
// entry: four places, each on a page of its own once a million hosts are held. Here a
// lookup reads its slot (the hash first), then the entry's key and the entry: what a host
// in use costs the cache and the TLB no longer grows with the idle hosts beside it
// (gate_bench). A slot whose hash matches asks for the entry's lines and its key's
// characters at once (prefetch), rather than one miss after another as acquire and
// release reach them.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

namespace politeproxy {

struct host_entry;

namespace host_map_detail {
// Slot arrays of 2 MiB and more are mapped apart, in whole huge pages (base/huge_pages.hpp):
// a million hosts' slots are 16 arrays of 4 MiB, and on 4 KiB pages each lookup among them
// would also miss the TLB.
void* allocate(std::size_t bytes);
void deallocate(void* p, std::size_t bytes) noexcept;

template <class T>
struct huge_page_allocator {
    using value_type = T;
    huge_page_allocator() = default;
    template <class U>
    huge_page_allocator(const huge_page_allocator<U>&) {}
    T* allocate(std::size_t n) { return static_cast<T*>(host_map_detail::allocate(n * sizeof(T))); }
    void deallocate(T* p, std::size_t n) noexcept { host_map_detail::deallocate(p, n * sizeof(T)); }
    template <class U>
    bool operator==(const huge_page_allocator<U>&) const { return true; }
};
}  // namespace host_map_detail

class host_map {
public:
    host_map() = default;
    host_map(const host_map&) = delete;
    host_map& operator=(const host_map&) = delete;

    /// The hash a key is filed under: keyed_hash (SipHash under a secret key), since keys
    /// are names a client or a page chose, and known slots would let them pile up in one.
    static std::size_t hash_of(std::string_view key);

    /// `key`'s entry (the table's owner of it), or null; `hash`: hash_of(key), when the
    /// caller has it already (host_table picks the shard by it).
    const std::shared_ptr<host_entry>* find(std::string_view key, std::size_t hash) const;
    const std::shared_ptr<host_entry>* find(std::string_view key) const { return find(key, hash_of(key)); }
    /// Files `entry` (whose key is not here yet; `hash`: hash_of(its key)).
    void insert(std::shared_ptr<host_entry> entry, std::size_t hash);
    void insert(std::shared_ptr<host_entry> entry);
    /// Asks the CPU for the slot a lookup of `hash` starts at, and may be called without
    /// the lock that guards the map (host_table::locate: the slot arrives while the lock is
    /// taken). It reads the layout's published copy, at worst one layout old: a prefetch of
    /// memory given back, or past an array's end, does nothing.
    void prefetch_home(std::size_t hash) const noexcept;
    /// The slot a probe for `hash` starts at among `slot_count` (a power of 2) slots.
    static std::size_t home_in(std::size_t hash, std::size_t slot_count);
    /// Takes `key`'s entry out (null: none), for the caller to destroy where it likes.
    std::shared_ptr<host_entry> extract(std::string_view key);
    /// Takes slot i's entry out (see at()).
    std::shared_ptr<host_entry> extract_at(std::size_t i);
    /// Lays the slots out again, fewer (live entries at 1/4 of them), when live entries
    /// fill under 1/8 (after an eviction pass: the slots of a million hosts take 64 MiB).
    /// Keeps them as they are when memory for the new ones runs out.
    void shrink() noexcept;

    std::size_t size() const { return size_; }

    /// Slots, for passes in slices: slot i holds an entry or is null. Erasing leaves every
    /// other entry where it is; an insert may move them all (a new layout: layout() changes).
    std::size_t slot_count() const { return slots_.size(); }
    host_entry* at(std::size_t i) const { return slots_[i].entry.get(); }
    std::uint64_t layout() const { return layout_; }

    template <class F>
    void for_each(F&& f) const {
        for (const auto& s : slots_)
            if (s.entry) f(*s.entry);
    }

private:
    struct slot {
        std::size_t hash = 0;  ///< with no entry: 0 never used, 1 erased (probes go on past it)
        std::shared_ptr<host_entry> entry;
        const char* key_chars = nullptr;  ///< entry->key.data(): asked for with the entry (the key is const)
    };
    static constexpr std::size_t erased = 1;

    std::size_t find_slot(std::string_view key, std::size_t hash) const;  ///< slots_.size(): none
    std::size_t home(std::size_t hash) const { return home_at(hash, shift_); }  ///< where a probe for `hash` starts
    static std::size_t home_at(std::size_t hash, unsigned shift);
    void rebuild(std::size_t capacity);

    std::vector<slot, host_map_detail::huge_page_allocator<slot>> slots_;
    std::size_t size_ = 0;
    std::size_t erased_ = 0;
    std::uint64_t layout_ = 0;
    unsigned shift_ = 64;  ///< home(): 64 - log2(slot count)
    // slots_.data() and shift_ as of the last layout, for prefetch_home (written under the
    // lock, read without it: each alone, so a reader may pair one layout's with the next's).
    std::atomic<const slot*> published_slots_{nullptr};
    std::atomic<unsigned> published_shift_{64};
};

}  // namespace politeproxy
