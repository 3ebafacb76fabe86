#include "politeproxy/base/huge_pages.hpp"

#include <cstdint>
#include <new>

#include <sys/mman.h>

namespace politeproxy {

namespace {
std::size_t whole_pages(std::size_t bytes) { return (bytes + huge_page_size - 1) / huge_page_size * huge_page_size; }
}  // namespace

void* map_huge_pages(std::size_t bytes) {
    // Mapped with a huge page's worth to spare, then trimmed to an aligned run of whole
    // huge pages: the kernel backs an aligned, advised range with them.
    const std::size_t length = whole_pages(bytes);
    void* mapped = mmap(nullptr, length + huge_page_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mapped == MAP_FAILED) throw std::bad_alloc();
    auto* const start = static_cast<char*>(mapped);
    auto* const aligned =
        reinterpret_cast<char*>((reinterpret_cast<std::uintptr_t>(start) + huge_page_size - 1) & ~(huge_page_size - 1));
    // The head before the aligned start, and the tail after the run (never empty: a
    // huge page less the head).
    if (aligned != start) munmap(start, static_cast<std::size_t>(aligned - start));
    munmap(aligned + length, static_cast<std::size_t>(start + huge_page_size - aligned));
    madvise(aligned, length, MADV_HUGEPAGE);  // a hint: without THP, 4 KiB pages
    return aligned;
}

void unmap_huge_pages(void* p, std::size_t bytes) noexcept { munmap(p, whole_pages(bytes)); }

}  // namespace politeproxy
