#pragma once
// Memory mapped apart in whole 2 MiB pages, aligned to them and marked for transparent
// huge pages (madvise: Debian's default mode), for tables read at random by the million
// (the host table's slots, the host entries): on 4 KiB pages each read among them would
// also miss the TLB. Without THP the kernel backs them with 4 KiB pages.
#include <cstddef>

namespace politeproxy {

inline constexpr std::size_t huge_page_size = std::size_t{2} << 20;

/// `bytes` rounded up to whole huge pages, zeroed, aligned to a huge page; std::bad_alloc
/// when the mapping fails.
void* map_huge_pages(std::size_t bytes);
/// Unmaps what map_huge_pages(bytes) returned.
void unmap_huge_pages(void* p, std::size_t bytes) noexcept;

}  // namespace politeproxy
