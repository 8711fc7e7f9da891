// The read deadline (runtime/exec/read_pool.h) with a test-only source whose
// reads of chosen samples block until the test releases them: a stuck read
// becomes a kIo error naming the deadline while its I/O thread stays stuck,
// the slot goes on with a fresh buffer, too many stuck reads fail fast,
// Cancel() wakes a waiting read, and destroying the pool with a read stuck
// returns while the stuck thread keeps the source alive until it returns.
//
// Time bounds here are generous upper bounds on waits that a bug would make
// infinite ("returns within 5 s"), never speed assertions.
#include "runtime/exec/read_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

namespace sluice::runtime {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// Sample i is 16 bytes of value i. Reads of samples in `blocked` wait until
// Release(); `entered` counts reads that started blocking.
class BlockingSource final : public Source {
 public:
  explicit BlockingSource(std::set<size_t> blocked) : blocked_(std::move(blocked)) {}
  size_t size() const override { return 64; }
  std::string SampleName(size_t i) const override { return "blocking:" + std::to_string(i); }
  int64_t label(size_t) const override { return 0; }
  const std::vector<std::string>& class_names() const override { return classes_; }
  Result<size_t> Read(size_t i, std::vector<uint8_t>& buffer) const override {
    if (blocked_.contains(i)) {
      std::unique_lock lock(mu_);
      ++entered_;
      cv_.notify_all();
      cv_.wait(lock, [&] { return released_; });
    }
    if (buffer.size() < 16) buffer.resize(16);
    std::fill(buffer.begin(), buffer.begin() + 16, static_cast<uint8_t>(i));
    return size_t{16};
  }
  void Release() {
    std::lock_guard lock(mu_);
    released_ = true;
    cv_.notify_all();
  }
  // Waits (at most 5 s) until `n` reads are blocking; false if they never are.
  bool WaitEntered(int n) const {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, 5s, [&] { return entered_ >= n; });
  }

 private:
  std::set<size_t> blocked_;
  std::vector<std::string> classes_;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  mutable int entered_ = 0;
  bool released_ = false;
};

// Polls `done` for at most 5 s.
bool Eventually(const std::function<bool()>& done) {
  const auto until = Clock::now() + 5s;
  while (!done()) {
    if (Clock::now() > until) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

TEST(ReadPoolTest, ReadsThroughThreadsReuseTheSlotBuffer) {
  auto source = std::make_shared<BlockingSource>(std::set<size_t>{});
  ReadPool pool(source, {.timeout_s = 30, .threads = 2});
  std::vector<std::thread> readers;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 2; ++t) {
    readers.emplace_back([&, t] {
      ReadSlot slot;
      const uint8_t* first = nullptr;
      for (size_t i = static_cast<size_t>(t); i < 64; i += 2) {
        auto n = pool.Read(i, slot);
        if (!n || *n != 16 || slot.buffer()[0] != i || slot.buffer()[15] != i) ++wrong;
        if (first == nullptr) first = slot.buffer().data();
        if (slot.buffer().data() != first) ++wrong;  // the buffer is reused, not reallocated
      }
    });
  }
  for (std::thread& r : readers) r.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(pool.stuck(), 0);
}

TEST(ReadPoolTest, ZeroTimeoutReadsInline) {
  auto source = std::make_shared<BlockingSource>(std::set<size_t>{});
  ReadPool pool(source, {.timeout_s = 0, .threads = 1});
  ReadSlot slot;
  auto n = pool.Read(5, slot);
  ASSERT_TRUE(n) << n.error().ToString();
  EXPECT_EQ(slot.buffer()[0], 5);
}

// Even samples are "in memory": ReadIfReady reads them; odd ones would block
// (nullopt). Records which thread ran each Read and ReadIfReady.
class HalfReadySource final : public Source {
 public:
  size_t size() const override { return 64; }
  std::string SampleName(size_t i) const override { return "half:" + std::to_string(i); }
  int64_t label(size_t) const override { return 0; }
  const std::vector<std::string>& class_names() const override { return classes_; }
  Result<size_t> Read(size_t i, std::vector<uint8_t>& buffer) const override {
    std::lock_guard lock(mu_);
    read_threads.push_back(std::this_thread::get_id());
    return Fill(i, buffer);
  }
  std::optional<Result<size_t>> ReadIfReady(size_t i, std::vector<uint8_t>& buffer) const override {
    if (i % 2 == 1) return std::nullopt;
    std::lock_guard lock(mu_);
    ready_threads.push_back(std::this_thread::get_id());
    return Fill(i, buffer);
  }
  mutable std::vector<std::thread::id> read_threads, ready_threads;

 private:
  static size_t Fill(size_t i, std::vector<uint8_t>& buffer) {
    if (buffer.size() < 16) buffer.resize(16);
    std::fill(buffer.begin(), buffer.begin() + 16, static_cast<uint8_t>(i));
    return 16;
  }
  std::vector<std::string> classes_;
  mutable std::mutex mu_;
};

TEST(ReadPoolTest, ReadsThatCannotBlockRunOnTheCallersThread) {
  auto source = std::make_shared<HalfReadySource>();
  ReadPool pool(source, {.timeout_s = 30, .threads = 1});
  ReadSlot slot;
  for (size_t i = 0; i < 8; ++i) {
    auto n = pool.Read(i, slot);
    ASSERT_TRUE(n) << n.error().ToString();
    EXPECT_EQ(slot.buffer()[0], i);
  }
  ASSERT_EQ(source->ready_threads.size(), 4u);  // samples 0, 2, 4, 6: no hand-off
  for (std::thread::id id : source->ready_threads) EXPECT_EQ(id, std::this_thread::get_id());
  ASSERT_EQ(source->read_threads.size(), 4u);  // samples 1, 3, 5, 7: an I/O thread
  for (std::thread::id id : source->read_threads) EXPECT_NE(id, std::this_thread::get_id());
}

TEST(ReadPoolTest, StuckReadPassesItsDeadlineAndTheSlotGoesOn) {
  auto source = std::make_shared<BlockingSource>(std::set<size_t>{3});
  ReadPool pool(source, {.timeout_s = 0.2, .threads = 1, .max_stuck = 4});
  ReadSlot slot;
  auto stuck = pool.Read(3, slot);
  ASSERT_FALSE(stuck);
  EXPECT_EQ(stuck.error().code, ErrorCode::kIo);
  EXPECT_NE(stuck.error().message.find("source.read_timeout (0.2 s)"), std::string::npos)
      << stuck.error().message;
  EXPECT_EQ(pool.stuck(), 1);
  // The same slot reads on, on a replacement thread, into a fresh buffer.
  auto next = pool.Read(7, slot);
  ASSERT_TRUE(next) << next.error().ToString();
  EXPECT_EQ(slot.buffer()[0], 7);
  source->Release();
  EXPECT_TRUE(Eventually([&] { return pool.stuck() == 0; }));
  auto after = pool.Read(3, slot);
  ASSERT_TRUE(after) << after.error().ToString();
  EXPECT_EQ(slot.buffer()[0], 3);
}

TEST(ReadPoolTest, TooManyStuckReadsFailFast) {
  auto source = std::make_shared<BlockingSource>(std::set<size_t>{1, 2});
  ReadPool pool(source, {.timeout_s = 0.1, .threads = 1, .max_stuck = 2});
  ReadSlot slot;
  EXPECT_FALSE(pool.Read(1, slot));
  EXPECT_FALSE(pool.Read(2, slot));
  EXPECT_EQ(pool.stuck(), 2);
  auto refused = pool.Read(9, slot);  // would not block, but no thread is left to spare
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("2 reads are stuck"), std::string::npos)
      << refused.error().message;
  source->Release();
  EXPECT_TRUE(Eventually([&] { return pool.stuck() == 0; }));
  auto again = pool.Read(9, slot);
  ASSERT_TRUE(again) << again.error().ToString();
  EXPECT_EQ(slot.buffer()[0], 9);
}

TEST(ReadPoolTest, CancelWakesAWaitingRead) {
  auto source = std::make_shared<BlockingSource>(std::set<size_t>{4});
  ReadPool pool(source, {.timeout_s = 3600, .threads = 1});
  Result<size_t> result = size_t{0};
  std::thread reader([&] {
    ReadSlot slot;
    result = pool.Read(4, slot);
  });
  ASSERT_TRUE(source->WaitEntered(1));
  pool.Cancel();
  reader.join();  // returns although the read is still stuck
  ASSERT_FALSE(result);
  EXPECT_NE(result.error().message.find("shutting down"), std::string::npos);
  ReadSlot slot;
  EXPECT_FALSE(pool.Read(5, slot));  // later reads fail fast
  source->Release();
}

TEST(ReadPoolTest, PauseWakesAWaitingReadUntilResume) {
  auto source = std::make_shared<BlockingSource>(std::set<size_t>{4});
  ReadPool pool(source, {.timeout_s = 3600, .threads = 1});
  Result<size_t> result = size_t{0};
  std::thread reader([&] {
    ReadSlot slot;
    result = pool.Read(4, slot);
  });
  ASSERT_TRUE(source->WaitEntered(1));
  pool.Pause();
  reader.join();  // returns although the read is still stuck
  ASSERT_FALSE(result);
  EXPECT_NE(result.error().message.find("restarting"), std::string::npos);
  ReadSlot slot;
  EXPECT_FALSE(pool.Read(5, slot));  // fails fast while paused
  pool.Resume();
  EXPECT_EQ(pool.stuck(), 1);
  auto read = pool.Read(5, slot);  // a replacement thread serves it
  ASSERT_TRUE(read) << read.error().ToString();
  EXPECT_EQ(slot.buffer()[0], 5);
  source->Release();
  EXPECT_TRUE(Eventually([&] { return pool.stuck() == 0; }));
}

TEST(ReadPoolTest, DestroyingThePoolWithAStuckReadReturnsAndKeepsTheSourceAlive) {
  auto source = std::make_shared<BlockingSource>(std::set<size_t>{0});
  std::weak_ptr<BlockingSource> weak = source;
  const auto start = Clock::now();
  {
    ReadPool pool(source, {.timeout_s = 0.1, .threads = 2});
    ReadSlot slot;
    EXPECT_FALSE(pool.Read(0, slot));
  }  // the destructor does not wait for the stuck thread
  EXPECT_LT(Clock::now() - start, 5s);
  BlockingSource* raw = source.get();
  source.reset();
  EXPECT_FALSE(weak.expired());  // the stuck thread still holds the source
  raw->Release();
  EXPECT_TRUE(Eventually([&] { return weak.expired(); }));  // and frees it when it returns
}

}  // namespace
}  // namespace sluice::runtime
