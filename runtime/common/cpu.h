// How many cores this process may use, as a Kubernetes pod sees it.
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

}  // namespace tp
