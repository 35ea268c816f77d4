#include "common/cpu.h"

#include <sched.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
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

std::optional<bool> cpu_computes_bf16(const fs::path& cpuinfo) {
  std::ifstream in(cpuinfo);
  for (std::string line; std::getline(in, line);) {
    const std::string key = line.substr(0, line.find_first_of("\t:"));
    if (key != "flags" && key != "Features") continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    for (std::string word; words >> word;) {
      if (word == "avx512_bf16" || word == "amx_bf16" || word == "bf16") return true;
    }
    return false;
  }
  return std::nullopt;
}

}  // namespace tp
