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

// /proc/cpuinfo as x86 and Arm kernels write it: the first "flags" or "Features" line decides.
TEST(CpuComputesBf16, ReadsTheFlagsOfX86AndTheFeaturesOfArm) {
  TempDir dir;
  const auto with = [&](const std::string& text) {
    write_text(dir / "cpuinfo", text);
    return cpu_computes_bf16(dir / "cpuinfo");
  };
  const std::string head = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC\n";
  EXPECT_EQ(with(head + "flags\t\t: fpu sse2 avx2 fma bmi2\nbugs\t\t: sysret_ss_attrs\n"), false);
  EXPECT_EQ(with(head + "flags\t\t: fpu avx2 avx512f avx512_bf16 avx512_vnni\n"), true);
  EXPECT_EQ(with(head + "flags\t\t: fpu avx512f amx_bf16 amx_tile\n"), true);
  EXPECT_EQ(with(head + "flags\t\t: fpu avx512f avx512_bf16x\n"), false) << "whole words only";
  EXPECT_EQ(with("processor\t: 0\nFeatures\t: fp asimd sve bf16 i8mm\n"), true);
  EXPECT_EQ(with("processor\t: 0\nFeatures\t: fp asimd evtstrm aes\n"), false);
  EXPECT_EQ(with(head + "flags\t\t: avx2\nflags\t\t: avx512_bf16\n"), false) << "the first processor's";
  EXPECT_EQ(with(head), std::nullopt) << "no flags line";
  EXPECT_EQ(cpu_computes_bf16(dir / "missing"), std::nullopt);
}

}  // namespace
}  // namespace tp
