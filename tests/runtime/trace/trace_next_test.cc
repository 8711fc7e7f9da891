// The consumer track's "next" spans with Loader::NextWithin: a caller that
// waits in slices (Python and `sluice run` do, to see signals) gets one
// "next" span per batch, not one per slice; a timed-out call that the caller
// does not follow at once (it polled, then did other work) is a span of its
// own, ended where that call ended, and so is one left open at StopTrace.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <thread>

#include "tests/runtime/loader/loader_test_util.h"

namespace sluice {
namespace {

using namespace testing_loader;
using nlohmann::json;
using std::chrono::milliseconds;

struct NextSpan {
  double ts = 0, end = 0;  // microseconds
  bool has_batch = false;
};

std::vector<NextSpan> NextSpans(const fs::path& file) {
  const json j = json::parse(ReadTextFile(file));
  std::vector<NextSpan> out;
  for (const json& e : j.at("traceEvents")) {
    if (e.at("ph") != "X" || e.at("name") != "next") continue;
    const double ts = e.at("ts");
    out.push_back({ts, ts + e.at("dur").get<double>(), e.at("args").contains("batch")});
  }
  std::sort(out.begin(), out.end(),
            [](const NextSpan& a, const NextSpan& b) { return a.ts < b.ts; });
  return out;
}

Loader TracedLoader(const fs::path& data, const fs::path& file) {
  return MakeSingleRankLoader(TestPlan().path, data, 1, file);
}

TEST(TraceNextTest, ASlicedWaitIsOneNextSpan) {
  SLUICE_REQUIRE_TEST_PLAN();
  ScopedDir data("trace_next_sliced");
  MakeDataset(data.path(), 24, 3, 200, 300);  // larger images: the consumer waits
  const fs::path file = data.path() / "run.json";
  Loader loader = TracedLoader(data.path(), file);
  int batches = 0, slices = 0;
  while (true) {
    bool timed_out = false;
    auto next = loader.NextWithin(milliseconds(0), &timed_out);
    ASSERT_TRUE(next) << next.error().ToString();
    if (timed_out) {
      ++slices;
      continue;
    }
    if (!*next) break;
    ++batches;
  }
  ASSERT_TRUE(loader.StopTrace());
  EXPECT_EQ(batches, 6);
  EXPECT_GT(slices, 0);  // the test waited in slices at all
  const std::vector<NextSpan> spans = NextSpans(file);
  EXPECT_EQ(spans.size(), static_cast<size_t>(batches + 1)) << slices << " timed-out slices";
  for (size_t i = 0; i + 1 < spans.size(); ++i) EXPECT_TRUE(spans[i].has_batch) << i;
}

TEST(TraceNextTest, AnAbandonedSliceIsItsOwnSpan) {
  SLUICE_REQUIRE_TEST_PLAN();
  ScopedDir data("trace_next_poll");
  MakeDataset(data.path(), 8, 3, 200, 300);
  const fs::path file = data.path() / "run.json";
  Loader loader = TracedLoader(data.path(), file);
  bool timed_out = false;
  auto first = loader.NextWithin(milliseconds(0), &timed_out);
  ASSERT_TRUE(first);
  if (!timed_out) GTEST_SKIP() << "the first batch was ready at once";
  std::this_thread::sleep_for(milliseconds(120));  // other work, past the slice gap
  auto batch = loader.Next();
  ASSERT_TRUE(batch && *batch);
  batch->reset();
  // A sliced wait that is stopped while open: written at StopTrace.
  bool stopped_in_slice = false;
  for (int i = 0; i < 1000 && !stopped_in_slice; ++i) {
    auto next = loader.NextWithin(milliseconds(0), &timed_out);
    ASSERT_TRUE(next);
    stopped_in_slice = timed_out;
  }
  ASSERT_TRUE(loader.StopTrace());
  const std::vector<NextSpan> spans = NextSpans(file);
  // The abandoned poll, the batch, maybe a batch that was ready, the open slice.
  ASSERT_GE(spans.size(), 3u);
  EXPECT_FALSE(spans[0].has_batch);
  EXPECT_TRUE(spans[1].has_batch);
  EXPECT_GE(spans[1].ts - spans[0].end, 100e3);  // the sleep is in neither
  if (stopped_in_slice) EXPECT_FALSE(spans.back().has_batch);
}

}  // namespace
}  // namespace sluice
