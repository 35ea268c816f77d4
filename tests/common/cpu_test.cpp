// A pod's CPU limit, read from cgroup files as the kernel writes them (v2 and v1).
#include "common/cpu.h"

#include <gtest/gtest.h>

#include <thread>

#include "support/temp_dir.h"

namespace tp {
namespace {

using testing::TempDir;
using testing::write_text;

TEST(CgroupCpuQuota, ReadsCgroupV2AndV1) {
  TempDir v2;
  write_text(v2 / "cpu.max", "250000 100000\n");
  EXPECT_DOUBLE_EQ(*cgroup_cpu_quota(v2.path()), 2.5);
  write_text(v2 / "cpu.max", "max 100000\n");
  EXPECT_FALSE(cgroup_cpu_quota(v2.path())) << "no limit";

  TempDir v1;
  write_text(v1 / "cpu/cpu.cfs_quota_us", "400000\n");
  write_text(v1 / "cpu/cpu.cfs_period_us", "100000\n");
  EXPECT_DOUBLE_EQ(*cgroup_cpu_quota(v1.path()), 4.0);
  write_text(v1 / "cpu/cpu.cfs_quota_us", "-1\n");
  EXPECT_FALSE(cgroup_cpu_quota(v1.path())) << "no limit";

  TempDir empty;
  EXPECT_FALSE(cgroup_cpu_quota(empty.path()));
  write_text(empty / "cpu.max", "garbage\n");
  EXPECT_FALSE(cgroup_cpu_quota(empty.path()));
}

TEST(UsableCores, AtLeastOneAndNoMoreThanTheMachineHas) {
  const int cores = usable_cores();
  EXPECT_GE(cores, 1);
  EXPECT_LE(cores, static_cast<int>(std::thread::hardware_concurrency()));
}

}  // namespace
}  // namespace tp
