// The differences between LibTorch 1.13 (Debian 12, CPU), 2.6 (Debian 13, CPU, no libuv) and 2.x (PyTorch's
// CUDA builds) that the engine sees, in one place. In 1.13 the Gloo and NCCL process groups derive from
// c10d::ProcessGroup; in 2.x from c10d::Backend. Autocast took the device as an argument from 2.4 on; before,
// CPU and CUDA had their own functions. 2.x throws typed distributed errors (c10::DistError); 1.13 does not.
// From 2.4 the TCPStore server uses libuv by default, which a LibTorch built without it refuses. 2.5 moved the
// CUDA allocator's statistics types to c10::CachingDeviceAllocator. An optimizer's per-parameter state is keyed
// by the parameter's TensorImpl address: as a string in 1.13, as the pointer in 2.x.
#pragma once

#include <ATen/autocast_mode.h>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/version.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>
#include <type_traits>
#ifdef TRAINPOINT_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#define TP_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) || (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

namespace tp::dist::compat {

#if TORCH_VERSION_MAJOR >= 2
using BackendBase = c10d::Backend;
#else
using BackendBase = c10d::ProcessGroup;
#endif

// Turns autocast on `device` (CPU or CUDA) to `dtype` on or off; off also drops the cached casts of the
// weights.
inline void set_autocast(at::DeviceType device, bool enabled, at::ScalarType dtype) {
#if TP_TORCH_AT_LEAST(2, 4)
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

// Whether a c10d failure came from the network or the other ranks (worth a restart) rather than from this
// LibTorch or the arguments given to it (permanent). 2.x throws c10::DistError for the first kind and plain
// c10::Error for the second; 1.13 has no such types, so there every failure counts as the network's.
inline bool is_network_failure(const std::exception& error) {
#if TP_TORCH_AT_LEAST(2, 2)
  return dynamic_cast<const c10::DistError*>(&error) != nullptr || dynamic_cast<const c10::Error*>(&error) == nullptr;
#else
  (void)error;
  return true;
#endif
}

// Whether a LibTorch error is a failure of the communication between ranks: c10d's distributed errors (2.x), or
// NCCL's, whose text names it in every version ("NCCL error", "NCCL communicator was aborted").
inline bool is_communication_failure(const std::exception& error) {
#if TP_TORCH_AT_LEAST(2, 2)
  if (dynamic_cast<const c10::DistError*>(&error) != nullptr) return true;
#endif
  return std::string(error.what()).find("NCCL") != std::string::npos;
}

// A TCPStore client, or the server when options.isServer. A LibTorch built without libuv (Debian 13's 2.6)
// refuses 2.4's default libuv server in the constructor, before any socket is opened: the store is then made
// with the classic server every version has, and so is every later one in this process.
inline c10::intrusive_ptr<c10d::TCPStore> make_tcp_store(const std::string& host, c10d::TCPStoreOptions options) {
#if TP_TORCH_AT_LEAST(2, 4)
  static std::atomic<bool> without_libuv{false};
  if (without_libuv) options.useLibUV = false;
  try {
    return c10::make_intrusive<c10d::TCPStore>(host, options);
  } catch (const c10::Error& error) {
    if (!options.useLibUV || std::string(error.what()).find("without libuv") == std::string::npos) throw;
    without_libuv = true;
    options.useLibUV = false;
  }
#endif
  return c10::make_intrusive<c10d::TCPStore>(host, options);
}

// PyTorch's own NCCL watchdog aborts the process (SIGABRT, exit 134) when a collective fails or times out;
// the communicator's watchdog reports those instead (exit 202, naming the lost ranks), so the process
// group only records them. Read when a ProcessGroupNCCL is made; 2.2 renamed the variable.
inline void leave_nccl_failures_to_the_caller() {
#if TP_TORCH_AT_LEAST(2, 2)
  setenv("TORCH_NCCL_ASYNC_ERROR_HANDLING", "0", 1);
#else
  setenv("NCCL_ASYNC_ERROR_HANDLING", "0", 1);
#endif
}

// The key of `parameter`'s entry in a torch::optim optimizer's `state` map (StateMap: its type).
template <typename StateMap>
typename StateMap::key_type optimizer_state_key(const at::Tensor& parameter) {
  if constexpr (std::is_same_v<typename StateMap::key_type, std::string>) {
    std::ostringstream address;  // as 1.13's c10::guts::to_string writes it
    address << parameter.unsafeGetTensorImpl();
    return address.str();
  } else {
    return parameter.unsafeGetTensorImpl();
  }
}

#ifdef TRAINPOINT_WITH_CUDA
// What LibTorch's CUDA caching allocator holds on a GPU now, all its pools together.
struct GpuMemory {
  std::int64_t allocated_bytes;
  std::int64_t reserved_bytes;
};
inline GpuMemory gpu_memory(int device) {
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(device));
#if TP_TORCH_AT_LEAST(2, 5)
  constexpr auto all = static_cast<std::size_t>(c10::CachingDeviceAllocator::StatType::AGGREGATE);
#else
  constexpr auto all = static_cast<std::size_t>(c10::cuda::CUDACachingAllocator::StatType::AGGREGATE);
#endif
  return {stats.allocated_bytes[all].current, stats.reserved_bytes[all].current};
}
#endif

}  // namespace tp::dist::compat
