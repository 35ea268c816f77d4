// How many cores this process may use, as a Kubernetes pod sees it, and what they compute in hardware.
#pragma once

#include <filesystem>
#include <optional>

namespace tp {

// The cgroup's CPU quota in cores (a pod's CPU limit): cgroup v2's cpu.max ("max 100000" is none), else
// cgroup v1's cpu/cpu.cfs_quota_us over cpu/cpu.cfs_period_us (-1 is none), under `cgroup_root`.
// Nothing when there is no quota or the files are missing or unreadable.
std::optional<double> cgroup_cpu_quota(const std::filesystem::path& cgroup_root = "/sys/fs/cgroup");

// The cores of this process's CPU affinity mask, capped by the cgroup's quota rounded up; at least 1.
// std::thread::hardware_concurrency() counts the node's cores: a pod limited to 4 CPUs on a 64-core
// node would start 64 threads per worker and be throttled.
int usable_cores();

// Whether the CPU computes bf16 in hardware, from /proc/cpuinfo (or the file at `cpuinfo`): its first "flags"
// line (x86: avx512_bf16 or amx_bf16) or "Features" line (Arm: bf16). Without them PyTorch emulates bf16,
// and a bf16 training step ran about 10x slower than fp32 (docs/benchmarks.md, AMD EPYC with AVX2). Nothing when
// the file has neither line or cannot be read.
std::optional<bool> cpu_computes_bf16(const std::filesystem::path& cpuinfo = "/proc/cpuinfo");

}  // namespace tp
