// How many CPUs this process may run on: the one count that sizes thread
// pools from the machine (the loader's `threads: auto`, sluice profile,
// sluice pack and inspect, the remote store's curl loops).
#pragma once

#include <string>

namespace sluice {

// The CPUs this process may use: the hardware threads in its CPU affinity
// (sched_getaffinity: taskset, a cpuset), else the online CPUs, capped by its
// cgroup's CPU quota rounded up (cgroup v2 cpu.max, v1 cpu.cfs_quota_us: a
// container's CPU limit, as Kubernetes sets it); at least 1.
int UsableCores();

// The CPU quota, in CPUs, that the cgroups named by `proc_self_cgroup` (the
// text of /proc/self/cgroup) put on a process: the smallest quota / period
// of its cgroup and the cgroup's ancestors, read under `cgroup_root`
// (/sys/fs/cgroup; v2's cpu.max, or v1's cpu controller files). 0 when no
// quota applies or none can be read.
double CgroupCpuQuota(const std::string& proc_self_cgroup, const std::string& cgroup_root);

// `cores` capped by a CPU quota (0 = none) rounded up: a 2.5-CPU quota
// allows 3 threads. At least 1.
int CoresWithinQuota(int cores, double quota);

}  // namespace sluice
