// WriteFileAtomically (common/atomic_file.h): whole-or-nothing replacement,
// no temporary left behind, umask-respecting mode, concurrent writers.
#include "common/atomic_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace sluice {
namespace {

namespace fs = std::filesystem;

class AtomicFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sluice_atomic_file_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  static std::string Read(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  // The names in the directory, besides `keep`.
  std::vector<std::string> Others(const std::string& keep) const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_)) {
      if (e.path().filename() != keep) out.push_back(e.path().filename().string());
    }
    return out;
  }
  fs::path dir_;
};

TEST_F(AtomicFileTest, WritesAndReplacesLeavingNoTemporary) {
  const fs::path p = dir_ / "plan.json";
  ASSERT_TRUE(WriteFileAtomically(p.string(), "first\n"));
  EXPECT_EQ(Read(p), "first\n");
  ASSERT_TRUE(WriteFileAtomically(p.string(), "second, longer\n"));
  EXPECT_EQ(Read(p), "second, longer\n");
  ASSERT_TRUE(WriteFileAtomically(p.string(), ""));
  EXPECT_EQ(Read(p), "");
  EXPECT_TRUE(Others("plan.json").empty());
}

TEST_F(AtomicFileTest, ModeIsTheUmasksLikeAnyNewFile) {
  const mode_t old = umask(027);
  Status s = WriteFileAtomically((dir_ / "a").string(), "x");
  umask(old);
  ASSERT_TRUE(s);
  struct stat st {};
  ASSERT_EQ(stat((dir_ / "a").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);  // 0666 less 027, not mkstemp's 0600
}

TEST_F(AtomicFileTest, AMissingDirectoryIsAnIoError) {
  Status s = WriteFileAtomically((dir_ / "no" / "plan.json").string(), "x");
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code, ErrorCode::kIo);
  EXPECT_NE(s.error().message.find("no/plan.json"), std::string::npos) << s.error().message;
}

// Writers of one path never share a temporary file: each call succeeds and
// the file is always one writer's whole content (a fixed PATH.tmp made one
// writer's rename fail, or renamed another's half-written file into place).
TEST_F(AtomicFileTest, ConcurrentWritersEachWriteWhole) {
  const fs::path p = dir_ / "plan.json";
  constexpr int kThreads = 8, kRounds = 50;
  std::vector<std::string> contents;
  for (int t = 0; t < kThreads; ++t) contents.push_back(std::string(20000 + t, 'a' + t));
  std::vector<int> failures(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < kRounds; ++r) {
        if (!WriteFileAtomically(p.string(), contents[t])) ++failures[t];
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], 0) << "writer " << t;
  const std::string final_text = Read(p);
  bool whole = false;
  for (const std::string& c : contents) whole = whole || final_text == c;
  EXPECT_TRUE(whole) << "plan.json holds " << final_text.size() << " bytes of no one writer";
  EXPECT_TRUE(Others("plan.json").empty());
}

}  // namespace
}  // namespace sluice
