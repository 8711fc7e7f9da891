// source.read_timeout end to end, with a real stalled file: a file_list entry
// that is a named pipe with no writer (open() blocks in the kernel, as a read
// from hung storage does). Under skip the stalled sample is a bad sample
// named with its path and the deadline, and the epoch completes; under fail
// Next() returns that error; destroying a loader whose worker waits on the
// stalled read (deadline far away) returns at once.
//
// The list sets allow_outside_root: true. A confined file_list read (the
// default) opens with O_NONBLOCK, so there a FIFO is an immediate "not a
// regular file" error (FileListContainment.FifoIsAnErrorNotAHang), not a
// stall; the unconfined read is a plain blocking open(), which a FIFO without
// a writer stalls in the kernel exactly as hung storage would.
//
// After each test the pipe is opened for writing, which releases the I/O
// threads still blocked in open() (they then see a non-regular file and exit).
// Time bounds are generous upper bounds on waits a bug would make infinite.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <future>
#include <thread>

#include "tests/runtime/loader/loader_test_util.h"

namespace sluice {
namespace {

using namespace testing_loader;
using nlohmann::json;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

class ReadDeadlineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SLUICE_REQUIRE_TEST_PLAN();
    work_ = std::make_unique<ScopedDir>("deadline_plans");
    data_ = std::make_unique<ScopedDir>("deadline_data");
    const fs::path d = data_->path();
    std::vector<std::string> files = MakeDataset(d, 11);
    fifo_ = (d / "stalled.jpg").string();
    ASSERT_EQ(::mkfifo(fifo_.c_str(), 0600), 0) << std::strerror(errno);
    std::ofstream list(d / "list.csv");
    list << "path,label\nstalled.jpg,1\n";  // relative to the list's folder
    std::ofstream good(d / "good.csv"), stalled(d / "stalled.csv");
    good << "path,label\n";
    stalled << "path,label\n";
    for (size_t i = 0; i < files.size(); ++i) {
      list << fs::relative(files[i], d).string() << "," << i % 3 << "\n";
      good << fs::relative(files[i], d).string() << "," << i % 3 << "\n";
      stalled << "stalled.jpg," << i % 3 << "\n";  // every sample stalls
    }
  }
  void TearDown() override { ReleaseFifo(); }

  // Opens the pipe for writing until no reader is blocked on it (at most 5 s).
  void ReleaseFifo() {
    if (fifo_.empty()) return;
    const auto until = Clock::now() + 5s;
    while (Clock::now() < until) {
      int fd = ::open(fifo_.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
      if (fd < 0) break;  // ENXIO: no reader left
      ::close(fd);
      std::this_thread::sleep_for(10ms);
    }
  }

  std::string PlanWith(const std::string& policy, double read_timeout,
                       const std::string& list = "list.csv") {
    const std::string name = list + policy + std::to_string(read_timeout) + ".plan";
    return EditedPlan(work_->path(), name, [&](json& j) {
      j["source"]["format"] = "file_list";
      // allow_outside_root: a blocking open(), see the file comment.
      j["source"]["params"] = {{"path", "${DATA}/" + list},  {"delimiter", "auto"},
                               {"path_column", "path"},      {"label_column", "label"},
                               {"allow_outside_root", true}, {"read_timeout", read_timeout}};
      j["sampling"]["order"] = "sequential";
      j["output"]["on_error"] = {{"policy", policy}, {"max_fraction", 0.5}};
    });
  }
  Result<Loader> Make(const std::string& plan_path) {
    auto plan = Plan::Load(plan_path, {{"DATA", data_->path().string()}});
    if (!plan) return std::unexpected(plan.error());
    LoaderOptions o;
    o.threads = 2;
    o.rank = 0;
    o.world_size = 1;
    return Loader::Create(*plan, o);
  }

  std::unique_ptr<ScopedDir> work_, data_;
  std::string fifo_;
};

TEST_F(ReadDeadlineTest, SkipTurnsAStalledReadIntoABadSample) {
  auto loader = Make(PlanWith("skip", 0.2));
  ASSERT_TRUE(loader) << loader.error().ToString();
  auto epoch = ReadEpoch(*loader);
  ASSERT_TRUE(epoch) << epoch.error().ToString();
  EXPECT_EQ(epoch->batches.size(), 3u);  // 12 samples, batch 4: every slot filled
  LoaderStats stats = loader->Stats();
  EXPECT_GE(stats.bad_samples, 1u);
  bool named = false;
  for (const BadSample& b : stats.last_bad) {
    named |= b.path.ends_with("stalled.jpg") &&
             b.reason.find("read_timeout (0.2 s)") != std::string::npos;
  }
  EXPECT_TRUE(named) << "no bad sample names stalled.jpg and its deadline";
}

TEST_F(ReadDeadlineTest, FailNamesTheStalledPathAndTheDeadline) {
  auto loader = Make(PlanWith("fail", 0.2));
  ASSERT_TRUE(loader) << loader.error().ToString();
  auto epoch = ReadEpoch(*loader);
  ASSERT_FALSE(epoch);
  EXPECT_NE(epoch.error().message.find("stalled.jpg"), std::string::npos) << epoch.error().message;
  EXPECT_NE(epoch.error().message.find("source.read_timeout (0.2 s)"), std::string::npos)
      << epoch.error().message;
}

TEST_F(ReadDeadlineTest, DestroyingALoaderWithAStalledReadReturns) {
  auto loader = Make(PlanWith("skip", 3600));
  ASSERT_TRUE(loader) << loader.error().ToString();
  // Sequential order: a worker starts on the pipe (sample 0) at creation. Give
  // it time to block there (not needed for correctness: shutdown returns
  // either way).
  std::this_thread::sleep_for(200ms);
  const auto start = Clock::now();
  { Loader gone = std::move(*loader); }
  EXPECT_LT(Clock::now() - start, 5s);
}

// NextWithin returns when its wait is over, with nothing ready (the only
// sample being made waits on the pipe): what lets Python check for Ctrl-C.
TEST_F(ReadDeadlineTest, NextWithinReturnsWhenItsWaitIsOver) {
  auto loader = Make(PlanWith("skip", 3600));
  ASSERT_TRUE(loader) << loader.error().ToString();
  bool timed_out = false;
  const auto start = Clock::now();
  auto next = loader->NextWithin(100ms, &timed_out);
  ASSERT_TRUE(next) << next.error().ToString();
  EXPECT_TRUE(timed_out);
  EXPECT_FALSE(next->has_value());
  EXPECT_LT(Clock::now() - start, 5s);
  ReleaseFifo();
}

// set_epoch / load_state_dict restart the loader: they drain its workers,
// and a worker inside a stalled read must not hold them for read_timeout
// (3600 s here). The epoch restarted then runs as before.
TEST_F(ReadDeadlineTest, RestoringWhileAReadIsStalledReturnsPromptly) {
  auto loader = Make(PlanWith("skip", 3600));
  ASSERT_TRUE(loader) << loader.error().ToString();
  std::this_thread::sleep_for(200ms);  // a worker now waits on the pipe (sample 0)
  LoaderState state = loader->State();
  state.epoch = 1;
  auto restored = std::async(std::launch::async, [&] { return loader->Restore(state); });
  const bool prompt = restored.wait_for(5s) == std::future_status::ready;
  if (!prompt) ReleaseFifo();  // let the test end
  ASSERT_TRUE(prompt) << "Restore waited for a stalled read";
  ASSERT_TRUE(restored.get());
  LoaderStats stats = loader->Stats();
  EXPECT_EQ(stats.bad_samples, 0u) << "the abandoned read of the old epoch is not counted";
  ReleaseFifo();  // the next epoch's read of the pipe then returns (empty: a bad sample)
}

// Two loaders in one process share TBB's threads (the limit is the largest
// live loader's threads + 1: here both ask for 3). A loader whose workers are
// all stuck in reads holds every thread, so the other loader's worker tasks
// stay queued. Destroying that other loader must not wait for tasks that
// never started: it once did, until the first loader's reads returned.
TEST_F(ReadDeadlineTest, DestroyingALoaderDoesNotWaitForAnotherLoadersStuckWorkers) {
  auto busy = Make(PlanWith("skip", 3600, "stalled.csv"));
  ASSERT_TRUE(busy) << busy.error().ToString();
  std::this_thread::sleep_for(300ms);  // both of its workers now wait on the pipe
  auto other = Make(PlanWith("skip", 30, "good.csv"));
  ASSERT_TRUE(other) << other.error().ToString();
  std::this_thread::sleep_for(100ms);
  auto destroyed = std::async(std::launch::async, [&] { Loader gone = std::move(*other); });
  const bool prompt = destroyed.wait_for(5s) == std::future_status::ready;
  { Loader gone = std::move(*busy); }  // frees the threads (a stuck `destroyed` then ends)
  destroyed.wait();
  EXPECT_TRUE(prompt) << "destroying a loader waited for another loader's stuck workers";
}

}  // namespace
}  // namespace sluice
