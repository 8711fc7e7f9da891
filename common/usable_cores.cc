#include "common/usable_cores.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace sluice {
namespace {

// The first line of `path`, or "" when it cannot be read.
std::string FirstLine(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// quota / period when both are positive numbers, else 0 ("max", -1: none).
double Ratio(const std::string& quota, const std::string& period) {
  char* end = nullptr;
  const double q = std::strtod(quota.c_str(), &end);
  if (end == quota.c_str() || q <= 0) return 0;
  const double p = std::strtod(period.c_str(), &end);
  if (end == period.c_str() || p <= 0) return 0;
  return q / p;
}

// v2: "QUOTA PERIOD" in DIR/cpu.max.
double QuotaV2(const std::filesystem::path& dir) {
  std::istringstream fields(FirstLine(dir / "cpu.max"));
  std::string quota, period;
  fields >> quota >> period;
  return Ratio(quota, period);
}

// v1: DIR/cpu.cfs_quota_us and DIR/cpu.cfs_period_us.
double QuotaV1(const std::filesystem::path& dir) {
  return Ratio(FirstLine(dir / "cpu.cfs_quota_us"), FirstLine(dir / "cpu.cfs_period_us"));
}

// The tighter of two quotas, 0 meaning none.
double Tighter(double a, double b) { return a == 0 ? b : b == 0 ? a : std::min(a, b); }

// The smallest quota of `base`/`path` and its ancestors up to `base`.
template <class ReadQuota>
double SmallestQuotaUpTheTree(const std::filesystem::path& base, std::string path, ReadQuota read) {
  double smallest = 0;
  for (;;) {
    smallest = Tighter(smallest, read(base / std::filesystem::path(path).relative_path()));
    if (path.empty() || path == "/") break;
    const size_t slash = path.find_last_of('/');
    path = slash == std::string::npos ? "" : path.substr(0, slash);
  }
  return smallest;
}

}  // namespace

double CgroupCpuQuota(const std::string& proc_self_cgroup, const std::string& cgroup_root) {
  const std::filesystem::path root(cgroup_root);
  double smallest = 0;
  std::istringstream lines(proc_self_cgroup);
  std::string line;
  while (std::getline(lines, line)) {
    // HIERARCHY-ID:CONTROLLERS:PATH; v2's unified hierarchy is "0::PATH".
    const size_t first = line.find(':');
    const size_t second = first == std::string::npos ? first : line.find(':', first + 1);
    if (second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    const std::string path = line.substr(second + 1);
    if (controllers.empty()) {
      // A pure v2 mount has cpu.max at the root; a hybrid one mounts v2 at unified/.
      const std::filesystem::path base =
          std::filesystem::exists(root / "cgroup.controllers") ? root : root / "unified";
      smallest = Tighter(smallest, SmallestQuotaUpTheTree(base, path, QuotaV2));
    } else if (("," + controllers + ",").find(",cpu,") != std::string::npos) {
      // v1 mounts the cpu controller as cpu/ (often a link to cpu,cpuacct/).
      const std::filesystem::path base =
          std::filesystem::exists(root / "cpu") ? root / "cpu" : root / controllers;
      smallest = Tighter(smallest, SmallestQuotaUpTheTree(base, path, QuotaV1));
    }
  }
  return smallest;
}

int UsableCores() {
  int cores = 0;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) cores = CPU_COUNT(&set);
  if (cores <= 0) {
    const long online = sysconf(_SC_NPROCESSORS_ONLN);
    cores = online > 0 ? static_cast<int>(online) : 1;
  }
  std::ifstream self("/proc/self/cgroup");
  std::stringstream text;
  text << self.rdbuf();
  return CoresWithinQuota(cores, CgroupCpuQuota(text.str(), "/sys/fs/cgroup"));
}

int CoresWithinQuota(int cores, double quota) {
  // Compared as doubles first: a huge finite quota must not overflow an int.
  if (quota > 0 && quota < static_cast<double>(cores)) cores = static_cast<int>(std::ceil(quota));
  return std::max(1, cores);
}

}  // namespace sluice
