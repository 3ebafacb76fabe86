#include "politeproxy/base/free_heap.hpp"

#ifdef POLITEPROXY_TCMALLOC
#include <gperftools/malloc_extension_c.h>

#include <cstddef>
#include <thread>
#else
#include <malloc.h>
#endif

namespace politeproxy {

void release_free_heap() {
#ifdef POLITEPROXY_TCMALLOC
    // In steps of 16 MiB: each holds the page heap's lock while it returns its spans, and
    // a worker that needs a span gets the lock between steps. All at once, returning the
    // gigabyte a /hosts answer of a million hosts used held it for tens of ms.
    // A step that returns a span larger than itself counts the difference against the
    // next steps (which then return nothing): at most twice the free bytes' worth of steps.
    // The call at the end returns what is left (freed meanwhile) and clears that count,
    // which would otherwise turn the next call's steps into nothing.
    constexpr std::size_t step = std::size_t{16} << 20;
    std::size_t free_bytes = 0;
    if (!MallocExtension_GetNumericProperty("tcmalloc.pageheap_free_bytes", &free_bytes)) {
        MallocExtension_ReleaseFreeMemory();
        return;
    }
    for (std::size_t steps = 2 * (free_bytes / step) + 2; steps > 0 && free_bytes > 0; --steps) {
        MallocExtension_ReleaseToSystem(step);
        std::this_thread::yield();
        if (!MallocExtension_GetNumericProperty("tcmalloc.pageheap_free_bytes", &free_bytes)) break;
    }
    MallocExtension_ReleaseFreeMemory();
#else
    ::malloc_trim(0);
#endif
}

}  // namespace politeproxy
