// common/usable_cores.h: the CPU affinity capped by a cgroup CPU quota, read
// from cgroup trees laid out here as the kernel lays out v2, v1 and hybrid.
#include "common/usable_cores.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <thread>

#include "tests/runtime/test_tmpdir.h"

namespace sluice {
namespace {

using runtime::testing::TempDir;

TEST(CgroupCpuQuota, V2ReadsCpuMaxOfTheProcessCgroup) {
  TempDir root;
  root.Write("cgroup.controllers", "cpu memory\n");
  root.Write("kubepods/pod1/ctr/cpu.max", "250000 100000\n");
  EXPECT_DOUBLE_EQ(CgroupCpuQuota("0::/kubepods/pod1/ctr\n", root.path().string()), 2.5);
}

TEST(CgroupCpuQuota, V2TakesTheSmallestQuotaUpTheTree) {
  TempDir root;
  root.Write("cgroup.controllers", "cpu\n");
  root.Write("pod/cpu.max", "150000 100000\n");   // the pod's limit
  root.Write("pod/ctr/cpu.max", "max 100000\n");  // the container: none of its own
  EXPECT_DOUBLE_EQ(CgroupCpuQuota("0::/pod/ctr\n", root.path().string()), 1.5);
}

TEST(CgroupCpuQuota, V2InsideACgroupNamespaceReadsTheRoot) {
  TempDir root;
  root.Write("cgroup.controllers", "cpu\n");
  root.Write("cpu.max", "400000 100000\n");
  EXPECT_DOUBLE_EQ(CgroupCpuQuota("0::/\n", root.path().string()), 4.0);
}

TEST(CgroupCpuQuota, NoQuotaIsZero) {
  TempDir root;
  root.Write("cgroup.controllers", "cpu\n");
  root.Write("a/cpu.max", "max 100000\n");
  EXPECT_EQ(CgroupCpuQuota("0::/a\n", root.path().string()), 0);
  EXPECT_EQ(CgroupCpuQuota("0::/not/there\n", root.path().string()), 0);
  EXPECT_EQ(CgroupCpuQuota("", root.path().string()), 0);
  EXPECT_EQ(CgroupCpuQuota("garbage\n", root.path().string()), 0);
}

TEST(CgroupCpuQuota, V1ReadsTheCpuControllersFiles) {
  TempDir root;
  root.Write("cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "300000\n");
  root.Write("cpu,cpuacct/docker/abc/cpu.cfs_period_us", "100000\n");
  root.Write("cpu,cpuacct/docker/cpu.cfs_quota_us", "-1\n");
  root.Write("cpu,cpuacct/docker/cpu.cfs_period_us", "100000\n");
  const std::string self =
      "12:memory:/docker/abc\n"
      "4:cpu,cpuacct:/docker/abc\n"
      "1:name=systemd:/docker/abc\n";
  EXPECT_DOUBLE_EQ(CgroupCpuQuota(self, root.path().string()), 3.0);
}

TEST(CgroupCpuQuota, HybridTakesTheSmallerOfV1AndUnified) {
  TempDir root;  // no cgroup.controllers at the root: v2 lives under unified/
  root.Write("cpu/job/cpu.cfs_quota_us", "800000\n");
  root.Write("cpu/job/cpu.cfs_period_us", "100000\n");
  root.Write("unified/job/cpu.max", "200000 100000\n");
  EXPECT_DOUBLE_EQ(CgroupCpuQuota("3:cpu:/job\n0::/job\n", root.path().string()), 2.0);
}

TEST(CoresWithinQuota, RoundsTheQuotaUpAndKeepsTheSmaller) {
  EXPECT_EQ(CoresWithinQuota(16, 2.5), 3);
  EXPECT_EQ(CoresWithinQuota(16, 4.0), 4);
  EXPECT_EQ(CoresWithinQuota(16, 0.1), 1);
  EXPECT_EQ(CoresWithinQuota(2, 8.0), 2);
  EXPECT_EQ(CoresWithinQuota(2, 0), 2);     // no quota
  EXPECT_EQ(CoresWithinQuota(2, 1e15), 2);  // a huge quota, v1 allows ~2^44 us over 1 ms
  EXPECT_EQ(CoresWithinQuota(0, 0), 1);
}

TEST(UsableCores, AtMostTheAffinityAndAtLeastOne) {
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  const int cores = UsableCores();
  EXPECT_GE(cores, 1);
  EXPECT_LE(cores, CPU_COUNT(&set));
}

TEST(UsableCores, FollowsAnAffinityNarrowedToOneCpu) {
  // On a thread of its own, since sched_setaffinity(0) changes only the caller.
  int seen = 0;
  std::thread([&] {
    cpu_set_t set;
    CPU_ZERO(&set);
    ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
    int first = 0;
    while (!CPU_ISSET(first, &set)) ++first;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
    seen = UsableCores();
  }).join();
  EXPECT_EQ(seen, 1);
}

}  // namespace
}  // namespace sluice
