// How the process's allocator treats freed memory during training.
#pragma once

namespace tp {

// Keeps freed memory mapped for reuse instead of handing it back to the kernel. glibc returns blocks of
// 128 KiB and more (mmap, and trimming the heap's top), so every training step's activations and every
// loader batch came back as fresh pages that the kernel had to fault in and zero: ten times the page
// faults, CPU training steps 10-20% slower and image loading a third slower (bench/train, bench/data).
// Training allocates the same sizes step after step, so the process's resident memory stays at its peak
// instead of growing. Process-wide; call it once before training.
void keep_freed_memory();

}  // namespace tp
