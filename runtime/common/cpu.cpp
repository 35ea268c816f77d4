#include "common/cpu.h"

#include <sched.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>
#include <thread>

namespace tp {

namespace fs = std::filesystem;

std::optional<double> cgroup_cpu_quota(const fs::path& cgroup_root) {
  std::ifstream v2(cgroup_root / "cpu.max");
  std::string quota;
  double period = 0;
  if (v2 >> quota >> period) {
    if (quota == "max" || period <= 0) return std::nullopt;
    try {
      const double cores = std::stod(quota) / period;
      return cores > 0 ? std::optional<double>(cores) : std::nullopt;
    } catch (const std::exception&) {
      return std::nullopt;
    }
  }
  std::ifstream v1_quota(cgroup_root / "cpu" / "cpu.cfs_quota_us");
  std::ifstream v1_period(cgroup_root / "cpu" / "cpu.cfs_period_us");
  double microseconds = 0;
  if (v1_quota >> microseconds && v1_period >> period && microseconds > 0 && period > 0) {
    return microseconds / period;
  }
  return std::nullopt;
}

int usable_cores() {
  int cores = static_cast<int>(std::thread::hardware_concurrency());
  cpu_set_t affinity;
  if (sched_getaffinity(0, sizeof affinity, &affinity) == 0) cores = CPU_COUNT(&affinity);
  if (const auto quota = cgroup_cpu_quota()) cores = std::min(cores, static_cast<int>(std::ceil(*quota)));
  return std::max(1, cores);
}

}  // namespace tp
