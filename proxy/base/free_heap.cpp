#include "politeproxy/base/free_heap.hpp"

#ifdef POLITEPROXY_TCMALLOC
#include <gperftools/malloc_extension_c.h>
#else
#include <malloc.h>
#endif

namespace politeproxy {

void release_free_heap() {
#ifdef POLITEPROXY_TCMALLOC
    MallocExtension_ReleaseFreeMemory();
#else
    ::malloc_trim(0);
#endif
}

}  // namespace politeproxy
