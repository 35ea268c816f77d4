// The differences between LibTorch 1.13 (Debian, CPU) and 2.x (CUDA) that the engine sees, in one
// place. In 1.13 the Gloo and NCCL process groups derive from c10d::ProcessGroup; in 2.x from
// c10d::Backend. Autocast took the device as an argument from 2.4 on; before, CPU and CUDA had their own
// functions.
#pragma once

#include <ATen/autocast_mode.h>
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

// Turns autocast on `device` (CPU or CUDA) to `dtype` on or off; off also drops the cached casts of the
// weights.
inline void set_autocast(at::DeviceType device, bool enabled, at::ScalarType dtype) {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
  at::autocast::set_autocast_enabled(device, enabled);
  at::autocast::set_autocast_dtype(device, dtype);
#else
  if (device == at::kCUDA) {
    at::autocast::set_enabled(enabled);
    at::autocast::set_autocast_gpu_dtype(dtype);
  } else {
    at::autocast::set_cpu_enabled(enabled);
    at::autocast::set_autocast_cpu_dtype(dtype);
  }
#endif
  if (!enabled) at::autocast::clear_cache();
}

}  // namespace tp::dist::compat
