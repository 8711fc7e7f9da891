#include "compiler/driver/plan_output.h"

#include <fcntl.h>
#include <stdio.h>  // renameat2 (glibc >= 2.28, _GNU_SOURCE)
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>
#include <utility>

#include "ops/fusion/plan_format.h"

namespace sluice {
namespace {

namespace fs = std::filesystem;
namespace pf = plan_format;

std::unexpected<Error> IoError(const std::string& what, const std::string& path, int err) {
  return MakeError(ErrorCode::kIo, "cannot " + what + " `" + path + "`: " + std::strerror(err));
}

std::unexpected<Error> NotADirectory(const std::string& path) {
  return MakeError(ErrorCode::kInvalidArgument, "`" + path + "` exists and is not a directory",
                   "a plan is a directory; pick another name for -o");
}

// The files of a plan, in the order a file-by-file replacement renames them.
// Between the renames a reader may find the new kernels.so beside the old
// plan.json: the plan.json hash check (Plan::Load, `sluice verify`) reports it.
constexpr const char* kPlanFiles[] = {pf::kKernelsFile, pf::kPlanFile, pf::kReportFile};

// The staging directory's name inside the plan directory, when the plan is
// replaced file by file.
constexpr const char* kInPlaceStaging = ".sluice-plan.tmp";

// Whether `name` may be in a plan directory: a plan's file, or what an
// interrupted writer leaves (WriteFileAtomically's .NAME.tmp.* files, the code
// generator's kernels.build.* directories; kernels.build and kernels.so.tmp
// from earlier compilers).
bool IsPlanEntry(const std::string& name) {
  for (const char* file : kPlanFiles) {
    if (name == file || name.starts_with("." + std::string(file) + ".tmp.")) return true;
  }
  return name.starts_with("kernels.build") || name == "kernels.so.tmp" ||
         name.starts_with(kInPlaceStaging);
}

// The first entry of `dir` that is not a plan's ("" when there is none).
Result<std::string> ForeignEntry(const fs::path& dir) {
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (!IsPlanEntry(name)) return name;
  }
  if (ec) return MakeError(ErrorCode::kIo, "cannot list `" + dir.string() + "`: " + ec.message());
  return std::string();
}

// fsync(2) of a directory; some file systems cannot (EINVAL), which is not an
// error.
Status SyncDir(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return IoError("open", dir.string(), errno);
  const int err = ::fsync(fd) == 0 ? 0 : errno;
  ::close(fd);
  if (err != 0 && err != EINVAL) return IoError("sync", dir.string(), err);
  return Ok();
}

// What `-o` names: the directory to replace, absolute, symbolic links resolved.
struct Target {
  fs::path path;
  // Whether `path` must not be swapped: `-o` ends in "." or "..", or names the
  // root or the working directory (a swap would move it away from under the
  // process or the user's shell).
  bool in_place_only = false;
};

Result<Target> ResolveTarget(const std::string& out_dir) {
  std::string trimmed = out_dir;
  while (trimmed.size() > 1 && trimmed.back() == '/') trimmed.pop_back();
  std::error_code ec;
  const fs::path absolute = fs::absolute(trimmed, ec);
  if (ec) return MakeError(ErrorCode::kIo, "cannot resolve `" + out_dir + "`: " + ec.message());
  if (fs::is_symlink(fs::symlink_status(absolute, ec)) && !fs::exists(absolute, ec)) {
    return MakeError(ErrorCode::kInvalidArgument, "`" + out_dir + "` is a symbolic link to nothing",
                     "a plan is a directory; remove the link or pick another name for -o");
  }
  Target t;
  t.path = fs::weakly_canonical(absolute, ec);
  if (ec) return MakeError(ErrorCode::kIo, "cannot resolve `" + out_dir + "`: " + ec.message());
  const fs::path last = fs::path(trimmed).filename();
  t.in_place_only = last == "." || last == ".." || t.path == t.path.root_path() ||
                    fs::equivalent(t.path, fs::current_path(ec), ec);
  return t;
}

// A new, empty directory PREFIX-PID-RANDOM (mode 0777 less the umask).
Result<std::string> MakeStagingDir(const std::string& prefix, const std::string& where) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  for (int attempt = 0; attempt < 16; ++attempt) {
    char suffix[64];
    std::snprintf(suffix, sizeof suffix, "-%ld-%08llx", static_cast<long>(::getpid()),
                  static_cast<unsigned long long>(rng() & 0xffffffffu));
    std::string staged = prefix + suffix;
    if (::mkdir(staged.c_str(), 0777) == 0) return staged;
    if (errno != EEXIST) {
      Error e = IoError("create a staging directory in", where, errno).error();
      e.hint =
          "the plan is built in a directory of its own beside the plan directory (inside it "
          "when that holds other files) and then moved in; that place must be writable";
      return std::unexpected(std::move(e));
    }
  }
  return IoError("create a staging directory in", where, EEXIST);
}

}  // namespace

Result<StagedPlanDir> StagedPlanDir::Create(const std::string& out_dir) {
  auto target = ResolveTarget(out_dir);
  if (!target) return std::unexpected(target.error());
  const fs::path& path = target->path;
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  const bool exists = fs::exists(status);
  if (exists && !fs::is_directory(status)) return NotADirectory(out_dir);
  bool in_place = target->in_place_only;
  if (exists && !in_place) {
    auto foreign = ForeignEntry(path);
    if (!foreign) return std::unexpected(foreign.error());
    in_place = !foreign->empty();  // never delete what is not a plan's
  }
  const fs::path make = in_place ? path : path.parent_path();
  fs::create_directories(make, ec);
  if (ec) {
    return MakeError(ErrorCode::kIo, "cannot create `" + make.string() + "`: " + ec.message());
  }
  auto staged = in_place ? MakeStagingDir((path / kInPlaceStaging).string(), path.string())
                         : MakeStagingDir(path.string() + ".tmp", make.string());
  if (!staged && !in_place && exists) {
    // The parent is not writable but PLAN may be: replace file by file, as
    // earlier compilers did.
    in_place = true;
    staged = MakeStagingDir((path / kInPlaceStaging).string(), path.string());
  }
  if (!staged) return std::unexpected(staged.error());
  StagedPlanDir dir(path.string(), std::move(*staged), in_place);
  // A swapped-in plan directory keeps the old one's permissions.
  if (struct stat st{}; !in_place && ::stat(dir.target_.c_str(), &st) == 0) {
    ::chmod(dir.staged_.c_str(), st.st_mode & 07777);
  }
  return dir;
}

StagedPlanDir::StagedPlanDir(StagedPlanDir&& other) noexcept
    : target_(std::move(other.target_)),
      staged_(std::exchange(other.staged_, std::string())),
      in_place_(other.in_place_) {}

StagedPlanDir::~StagedPlanDir() {
  if (staged_.empty()) return;
  std::error_code ec;
  fs::remove_all(staged_, ec);
}

Status StagedPlanDir::Commit() {
  if (staged_.empty()) return MakeError(ErrorCode::kInternal, "the plan was already committed");
  SLUICE_RETURN_IF_ERROR(SyncDir(staged_));
  if (in_place_) return ReplaceFileByFile();
  const fs::path parent = fs::path(target_).parent_path();
  // A few rounds: another compile may create or swap PLAN in between.
  for (int attempt = 0; attempt < 8; ++attempt) {
    // Replaces PLAN when it is absent or an empty directory.
    if (::rename(staged_.c_str(), target_.c_str()) == 0) {
      staged_.clear();
      return SyncDir(parent);
    }
    if (errno == ENOTDIR) return NotADirectory(target_);
    if (errno != EEXIST && errno != ENOTEMPTY) return IoError("replace", target_, errno);
    auto foreign = ForeignEntry(target_);
    if (!foreign) return std::unexpected(foreign.error());
    if (!foreign->empty()) return ReplaceFileByFile();  // never delete what is not a plan's
    if (::renameat2(AT_FDCWD, staged_.c_str(), AT_FDCWD, target_.c_str(), RENAME_EXCHANGE) == 0) {
      // staged_ now holds the old plan; a reader that has its files open keeps them.
      std::error_code ec;
      fs::remove_all(staged_, ec);
      staged_.clear();
      return SyncDir(parent);
    }
    // No RENAME_EXCHANGE here (an old kernel, a file system without it, e.g.
    // some network and FUSE file systems): the careful fallback.
    if (errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP) return ReplaceFileByFile();
    if (errno != ENOENT) return IoError("replace", target_, errno);
    // PLAN was removed meanwhile: rename again.
  }
  return IoError("replace", target_, EBUSY);
}

// Renames each plan file into PLAN (kernels.so first), then syncs PLAN and
// removes the staging directory. PLAN's other entries stay.
Status StagedPlanDir::ReplaceFileByFile() {
  for (const char* file : kPlanFiles) {
    const std::string from = (fs::path(staged_) / file).string();
    const std::string to = (fs::path(target_) / file).string();
    if (::rename(from.c_str(), to.c_str()) != 0) return IoError("replace", to, errno);
  }
  SLUICE_RETURN_IF_ERROR(SyncDir(target_));
  std::error_code ec;
  fs::remove_all(staged_, ec);
  staged_.clear();
  return Ok();
}

}  // namespace sluice
