#pragma once

namespace politeproxy {

/// Gives the memory the heap holds free back to the system. It blocks (returning a
/// large free span takes tens of ms): call it off the event loops.
///
/// With tcmalloc (the default build, CMakeLists.txt POLITEPROXY_TCMALLOC) it releases
/// the free pages of the page heap, which tcmalloc keeps otherwise, however idle; with
/// glibc's allocator (the sanitizer builds) it is malloc_trim(0).
void release_free_heap();

}  // namespace politeproxy
