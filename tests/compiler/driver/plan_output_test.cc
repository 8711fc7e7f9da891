// A plan directory written whole (compiler/driver/plan_output.h): staged
// beside PLAN and renamed or swapped in, or file by file into a directory that
// holds other files; the staging directory never outlives a failure; and a
// compile whose code generation fails leaves the previous plan as it was.
#include "compiler/driver/plan_output.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "sluice/compiler.h"

namespace sluice {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    std::string t = (fs::temp_directory_path() / "sluice_plan_output_XXXXXX").string();
    EXPECT_NE(::mkdtemp(t.data()), nullptr);
    path_ = t;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

std::string Read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void Write(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// The names in `dir`.
std::set<std::string> Entries(const fs::path& dir) {
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
  return names;
}

const std::set<std::string> kPlanFiles = {"kernels.so", "plan.json", "report.txt"};

void WritePlanFiles(const std::string& dir, const std::string& tag) {
  for (const std::string& f : kPlanFiles) Write(fs::path(dir) / f, tag + " " + f);
}

ino_t Inode(const fs::path& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_ino;
}

TEST(StagedPlanDir, NewPlanIsRenamedIntoPlace) {
  TempDir tmp;
  const fs::path plan = tmp.path() / "a.plan";
  auto staged = StagedPlanDir::Create(plan.string());
  ASSERT_TRUE(staged) << staged.error().ToString();
  EXPECT_EQ(fs::path(staged->path()).parent_path(), tmp.path());
  EXPECT_TRUE(fs::path(staged->path()).filename().string().starts_with("a.plan.tmp-"));
  EXPECT_FALSE(fs::exists(plan));  // nothing is visible before Commit
  WritePlanFiles(staged->path(), "new");
  ASSERT_TRUE(staged->Commit());
  EXPECT_EQ(Entries(plan), kPlanFiles);
  EXPECT_EQ(Read(plan / "plan.json"), "new plan.json");
  EXPECT_EQ(Entries(tmp.path()), std::set<std::string>{"a.plan"});
}

TEST(StagedPlanDir, ExistingPlanIsSwappedWhole) {
  TempDir tmp;
  const fs::path plan = tmp.path() / "a.plan";
  fs::create_directories(plan / "kernels.build");  // an older compiler's leftover
  WritePlanFiles(plan.string(), "old");
  ::chmod(plan.c_str(), 0750);
  const ino_t old_inode = Inode(plan);
  auto staged = StagedPlanDir::Create(plan.string() + "/");  // a trailing slash is fine
  ASSERT_TRUE(staged) << staged.error().ToString();
  EXPECT_EQ(fs::path(staged->path()).parent_path(), tmp.path());
  WritePlanFiles(staged->path(), "new");
  ASSERT_TRUE(staged->Commit());
  EXPECT_NE(Inode(plan), old_inode);  // a new directory, not new files in the old one
  EXPECT_EQ(Entries(plan), kPlanFiles);
  for (const std::string& f : kPlanFiles) EXPECT_EQ(Read(plan / f), "new " + f);
  EXPECT_EQ(fs::status(plan).permissions() & fs::perms::all, static_cast<fs::perms>(0750));
  EXPECT_EQ(Entries(tmp.path()), std::set<std::string>{"a.plan"});  // the old plan is gone
}

TEST(StagedPlanDir, DirectoryWithOtherFilesIsReplacedFileByFile) {
  TempDir tmp;
  const fs::path dir = tmp.path() / "work";
  fs::create_directories(dir);
  Write(dir / "notes.txt", "mine");
  WritePlanFiles(dir.string(), "old");
  auto staged = StagedPlanDir::Create(dir.string());
  ASSERT_TRUE(staged) << staged.error().ToString();
  EXPECT_EQ(fs::path(staged->path()).parent_path(), dir);  // staged inside, never swapped
  WritePlanFiles(staged->path(), "new");
  ASSERT_TRUE(staged->Commit());
  std::set<std::string> expected = kPlanFiles;
  expected.insert("notes.txt");
  EXPECT_EQ(Entries(dir), expected);
  EXPECT_EQ(Read(dir / "notes.txt"), "mine");
  EXPECT_EQ(Read(dir / "kernels.so"), "new kernels.so");
  EXPECT_EQ(Entries(tmp.path()), std::set<std::string>{"work"});
}

TEST(StagedPlanDir, DotIsNeverSwapped) {
  TempDir tmp;
  const fs::path dir = tmp.path() / "here";
  fs::create_directories(dir);
  const ino_t inode = Inode(dir);
  auto staged = StagedPlanDir::Create((dir / ".").string());
  ASSERT_TRUE(staged) << staged.error().ToString();
  WritePlanFiles(staged->path(), "new");
  ASSERT_TRUE(staged->Commit());
  EXPECT_EQ(Inode(dir), inode);
  EXPECT_EQ(Entries(dir), kPlanFiles);
}

TEST(StagedPlanDir, SymbolicLinkIsFollowed) {
  TempDir tmp;
  fs::create_directories(tmp.path() / "real.plan");
  fs::create_directory_symlink("real.plan", tmp.path() / "link.plan");
  auto staged = StagedPlanDir::Create((tmp.path() / "link.plan").string());
  ASSERT_TRUE(staged) << staged.error().ToString();
  WritePlanFiles(staged->path(), "new");
  ASSERT_TRUE(staged->Commit());
  EXPECT_TRUE(fs::is_symlink(tmp.path() / "link.plan"));
  EXPECT_EQ(Entries(tmp.path() / "real.plan"), kPlanFiles);
  EXPECT_EQ(Entries(tmp.path()), (std::set<std::string>{"link.plan", "real.plan"}));
}

TEST(StagedPlanDir, WithoutCommitNothingChangesAndNothingIsLeft) {
  TempDir tmp;
  const fs::path plan = tmp.path() / "a.plan";
  fs::create_directories(plan);
  WritePlanFiles(plan.string(), "old");
  {
    auto staged = StagedPlanDir::Create(plan.string());
    ASSERT_TRUE(staged) << staged.error().ToString();
    WritePlanFiles(staged->path(), "new");
  }
  EXPECT_EQ(Read(plan / "plan.json"), "old plan.json");
  EXPECT_EQ(Entries(tmp.path()), std::set<std::string>{"a.plan"});
}

TEST(StagedPlanDir, FileIsRefused) {
  TempDir tmp;
  Write(tmp.path() / "file", "x");
  auto staged = StagedPlanDir::Create((tmp.path() / "file").string());
  ASSERT_FALSE(staged);
  EXPECT_EQ(staged.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(staged.error().message.find("is not a directory"), std::string::npos);
  EXPECT_EQ(Entries(tmp.path()), std::set<std::string>{"file"});
}

const char* kSpec =
    "sluice: 1\nname: t\nsource: {format: image_folder, path: /d}\ngraph:\n"
    "  - decode_jpeg: {in: jpg, out: image}\n"
    "  - random_resized_crop: {size: [32, 32]}\n"
    "batch: {size: 4, fields: {image: image, label: cls}}\n";

Status CompileInto(const fs::path& plan, const std::string& cpu_target) {
  CompileOptions o;
  o.spec_text = kSpec;
  o.spec_name = "t.yaml";
  o.codegen.cpu_targets = {cpu_target};
  o.codegen.cuda = false;
  auto c = Compile(o);
  if (!c) return std::unexpected(c.error());
  EXPECT_FALSE(c->has_errors()) << c->diagnostics();
  return c->WritePlan(plan.string());
}

TEST(CompileDriverPlanOutput, FailedCodegenLeavesThePreviousPlan) {
  TempDir tmp;
  const fs::path plan = tmp.path() / "t.plan";
  Status first = CompileInto(plan, "x86-64-linux-sse41");
  ASSERT_TRUE(first) << first.error().ToString();
  ASSERT_EQ(Entries(plan), kPlanFiles);
  const std::string json = Read(plan / "plan.json");
  const std::string so = Read(plan / "kernels.so");
  Status second = CompileInto(plan, "not-a-halide-target");
  ASSERT_FALSE(second);
  EXPECT_EQ(second.error().code, ErrorCode::kInternal) << second.error().ToString();
  EXPECT_EQ(Entries(plan), kPlanFiles);  // no build directory left behind
  EXPECT_EQ(Read(plan / "plan.json"), json);
  EXPECT_EQ(Read(plan / "kernels.so"), so);
  EXPECT_EQ(Entries(tmp.path()), std::set<std::string>{"t.plan"});
}

}  // namespace
}  // namespace sluice
