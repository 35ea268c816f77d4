#include "common/memory.h"

#include <malloc.h>

namespace tp {

void keep_freed_memory() {
  mallopt(M_MMAP_MAX, 0);                // no block gets its own mapping: all come from the arenas' heaps
  mallopt(M_TRIM_THRESHOLD, 1 << 30);    // up to 1 GiB free at a heap's top stays mapped
}

}  // namespace tp
