#pragma once

namespace politeproxy {

/// Gives the memory the heap holds free back to the system. It blocks (returning a
/// large free span takes tens of ms): call it off the event loops. With tcmalloc a
/// worker that needs a new span meanwhile waits for the page heap's lock, for one step
/// of 16 MiB or one span, whichever is larger (and, at the end, for what was freed while
/// the steps ran).
///
/// With tcmalloc (the default build, CMakeLists.txt POLITEPROXY_TCMALLOC) it releases
/// the free pages of the page heap, which tcmalloc keeps otherwise, however idle.
/// Without (-DPOLITEPROXY_TCMALLOC=OFF) it is glibc's malloc_trim(0); in a sanitizer
/// build that trims a heap the sanitizer's allocator does not use.
void release_free_heap();

}  // namespace politeproxy
