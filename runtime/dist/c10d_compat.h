// The differences between LibTorch 1.13 (Debian, CPU) and 2.x (CUDA) that the distributed engine
// sees, in one place. In 1.13 the Gloo and NCCL process groups derive from c10d::ProcessGroup; in
// 2.x from c10d::Backend.
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/version.h>
#ifdef TRAINPOINT_WITH_CUDA
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

namespace tp::dist::compat {

#if TORCH_VERSION_MAJOR >= 2
using BackendBase = c10d::Backend;
#else
using BackendBase = c10d::ProcessGroup;
#endif

}  // namespace tp::dist::compat
