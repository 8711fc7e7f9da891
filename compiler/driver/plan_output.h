// A plan directory written whole (Compilation::WritePlan, compiler.cc): the
// compile driver builds kernels.so, plan.json and report.txt in a staging
// directory of its own, then moves them into PLAN (the `-o` directory).
//
//   PLAN absent (or an empty directory): the staging directory is
//     PLAN.tmp-PID-RANDOM beside PLAN, and rename(2) makes it PLAN.
//   PLAN a plan directory (only a plan's files, see IsPlanEntry in the .cc):
//     the same staging directory, then renameat2(2) with RENAME_EXCHANGE swaps
//     the two directories in one step, and the old plan (now at the staging
//     name) is removed.
//   PLAN a directory with other files too, or named by ".", "..", "/" or as
//     the working directory: the staging directory is
//     PLAN/.sluice-plan.tmp-PID-RANDOM and the three files are renamed into
//     PLAN one by one (kernels.so, plan.json, report.txt; each rename is
//     atomic, the set is not); PLAN's other files are left alone. This is also
//     the fallback where the file system has no RENAME_EXCHANGE (moving from
//     the sibling staging directory) and where PLAN's parent directory is not
//     writable.
//
// So concurrent compiles into one PLAN never share a file (each has its own
// staging directory; the last swap wins) and, where PLAN is renamed or
// swapped, a compile that fails or is killed midway leaves PLAN as it was. Every path lookup into
// PLAN finds a file of one whole plan; a reader that opens plan.json before a swap and kernels.so
// after it sees a kernels.so whose hash is not plan.json's, which Plan::Load and `sluice verify`
// report (kCorruptData) rather than use.
//
// Thread safety: a StagedPlanDir is used by one thread; different objects may
// be used concurrently, in one process or several.
#pragma once

#include <filesystem>
#include <string>

#include "sluice/result.h"

namespace sluice {

class StagedPlanDir {
 public:
  // Checks `out_dir` and creates its staging directory (see the file comment;
  // PLAN's parent directory is created if missing; a staging directory beside
  // PLAN gets PLAN's mode when PLAN exists). A symbolic link to a directory is
  // followed: the directory it names gets the plan. Errors: kInvalidArgument
  // (`out_dir` exists and is not a directory, or is a dangling link), kIo (the
  // staging directory's place is not writable).
  static Result<StagedPlanDir> Create(const std::string& out_dir);

  StagedPlanDir(StagedPlanDir&& other) noexcept;
  StagedPlanDir& operator=(StagedPlanDir&&) = delete;
  // Removes the staging directory and everything in it, unless Commit
  // succeeded.
  ~StagedPlanDir();

  // Where to write the plan's files.
  const std::string& path() const { return staged_; }
  // The directory the plan will be (out_dir, absolute, links resolved).
  const std::string& target() const { return target_; }

  // Swaps the staging directory in (see the file comment), durably: the
  // staging directory and PLAN's parent are fsynced. Call at most once, after
  // every file is written. Errors: kInvalidArgument (PLAN became a file), kIo
  // (after a failed file-by-file replacement PLAN may hold files of both plans).
  Status Commit();

 private:
  StagedPlanDir(std::string target, std::string staged, bool in_place)
      : target_(std::move(target)), staged_(std::move(staged)), in_place_(in_place) {}
  Status ReplaceFileByFile();

  std::string target_;
  std::string staged_;  // "" once committed or moved from
  bool in_place_;       // staged_ is inside target_: replace file by file
};

}  // namespace sluice
