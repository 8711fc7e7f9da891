// Loader::StartTrace / StopTrace on a real run: the file parses as JSON; on
// every track the complete spans nest (each span lies inside the one that
// encloses it or after it); every delivered sample has a "sample" span on a
// worker track holding its read, decode and kernel spans with the sample's
// index and path; the consumer track has one "next" span per Next() call and
// its waits inside them; the spans lie within the traced run; batch
// begin/end pairs and the counters are present.
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <map>
#include <set>

#include "tests/runtime/loader/loader_test_util.h"

namespace sluice {
namespace {

using namespace testing_loader;
using nlohmann::json;

struct Span {
  std::string name;
  int64_t ts = 0, end = 0;  // nanoseconds (the file has microseconds with 3 decimals)
  json args;
};

// Checks that the spans of one track nest: sorted by (start, longest first),
// each span either starts after the enclosing one ended or ends within it.
void ExpectNested(std::vector<Span> spans, int tid) {
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    return a.ts != b.ts ? a.ts < b.ts : a.end > b.end;
  });
  std::vector<const Span*> open;
  for (const Span& s : spans) {
    while (!open.empty() && open.back()->end <= s.ts) open.pop_back();
    if (!open.empty()) {
      EXPECT_LE(s.end, open.back()->end)
          << "track " << tid << ": " << s.name << " at " << s.ts << " overlaps "
          << open.back()->name << " at " << open.back()->ts;
    }
    open.push_back(&s);
  }
}

TEST(TraceLoaderTest, TraceNestsCoversTheRunAndCarriesArguments) {
  SLUICE_REQUIRE_TEST_PLAN();
  ScopedDir data("trace_data");
  const std::vector<std::string> paths = MakeDataset(data.path(), 26);
  auto plan = Plan::Load(TestPlan().path, {{"DATA", data.path().string()}});
  ASSERT_TRUE(plan) << plan.error().ToString();
  LoaderOptions options;
  options.threads = 2;
  options.rank = 0;
  options.world_size = 1;
  auto loader = Loader::Create(*plan, options);
  ASSERT_TRUE(loader) << loader.error().ToString();
  const fs::path file = data.path() / "run.json";
  ASSERT_TRUE(loader->StartTrace(file.string()));
  // Tracing starts after Create: the first batches may already be in
  // flight, so only the samples of batches started after it are checked.
  auto epoch = ReadEpoch(*loader);
  ASSERT_TRUE(epoch) << epoch.error().ToString();
  auto dropped = loader->StopTrace();
  ASSERT_TRUE(dropped) << dropped.error().ToString();
  EXPECT_EQ(*dropped, 0u);
  ASSERT_EQ(epoch->batches.size(), 6u);

  const json j = json::parse(ReadTextFile(file));
  std::map<int, std::vector<Span>> tracks;
  std::map<int, std::string> names;
  std::set<std::string> counters;
  std::map<uint64_t, int> async_balance;
  std::map<uint64_t, json> async_args;
  for (const json& e : j.at("traceEvents")) {
    const std::string ph = e.at("ph");
    const int tid = e.at("tid");
    if (ph == "M" && e.at("name") == "thread_name") names[tid] = e.at("args").at("name");
    if (ph == "X") {
      const int64_t ts = std::llround(e.at("ts").get<double>() * 1e3);
      const int64_t dur = std::llround(e.at("dur").get<double>() * 1e3);
      tracks[tid].push_back({e.at("name"), ts, ts + dur, e.at("args")});
    }
    if (ph == "C") counters.insert(e.at("name"));
    if (ph == "b") ++async_balance[e.at("id")], async_args[e.at("id")] = e.at("args");
    if (ph == "e") --async_balance[e.at("id")];
  }
  EXPECT_EQ(names[0], "consumer (Next)");
  EXPECT_EQ(names[2], "worker 0");
  EXPECT_EQ(names[3], "worker 1");
  for (const auto& [tid, spans] : tracks) ExpectNested(spans, tid);

  // Consumer: one "next" per Next() call (6 batches + the end of the epoch).
  const std::vector<Span>& consumer = tracks[0];
  const auto nexts = std::count_if(consumer.begin(), consumer.end(),
                                   [](const Span& s) { return s.name == "next"; });
  EXPECT_EQ(nexts, 7);
  int64_t run_begin = INT64_MAX, run_end = 0;
  for (const Span& s : consumer) {
    run_begin = std::min(run_begin, s.ts);
    run_end = std::max(run_end, s.end);
  }
  // Workers: every sample span holds read, decode and kernel of its index.
  std::multiset<uint64_t> sampled;
  int reads = 0;
  for (const auto& [tid, spans] : tracks) {
    if (tid < 2) continue;
    for (const Span& s : spans) {
      EXPECT_GE(s.ts, 0);
      if (s.name == "read" || s.name == "decode" || s.name == "kernel") {
        const std::string path = s.args.at("path");
        EXPECT_TRUE(std::find(paths.begin(), paths.end(), path) != paths.end()) << path;
        reads += s.name == "read";
        const auto parent = std::find_if(spans.begin(), spans.end(), [&](const Span& p) {
          return p.name == "sample" && p.ts <= s.ts && s.end <= p.end;
        });
        ASSERT_NE(parent, spans.end()) << s.name << " outside a sample span";
        EXPECT_EQ(parent->args.at("index"), s.args.at("index"));
      }
      if (s.name == "sample") sampled.insert(s.args.at("index").get<uint64_t>());
    }
  }
  // Every batch of epoch 0 assembled while tracing (its "batch" span began
  // and ended in the trace) has all its samples traced.
  int complete_batches = 0;
  for (const auto& [id, balance] : async_balance) {
    if (balance != 0 || async_args[id].at("epoch") != 0) continue;
    ++complete_batches;
    const uint64_t batch = async_args[id].at("batch");
    ASSERT_LT(batch, epoch->samples.size());
    for (uint64_t index : epoch->samples[batch]) {
      EXPECT_GE(sampled.count(index), 1u) << "batch " << batch << " sample " << index;
    }
  }
  EXPECT_GE(complete_batches, 3);  // prefetch 2: at most 3 batches began before StartTrace
  EXPECT_EQ(static_cast<size_t>(reads), sampled.size());  // no bad samples: one read each
  // The consumer's spans lie within the run it traced.
  EXPECT_GE(run_begin, 0);
  EXPECT_GT(run_end, run_begin);
  EXPECT_TRUE(counters.count("in-flight samples"));
  EXPECT_TRUE(counters.count("batches ready (queue)"));
  EXPECT_TRUE(counters.count("batches filling"));
}

TEST(TraceLoaderTest, DestroyingTheLoaderWritesARunningTrace) {
  SLUICE_REQUIRE_TEST_PLAN();
  ScopedDir data("trace_data2");
  MakeDataset(data.path(), 8);
  auto plan = Plan::Load(TestPlan().path, {{"DATA", data.path().string()}});
  ASSERT_TRUE(plan);
  const fs::path file = data.path() / "run.json";
  {
    auto loader = Loader::Create(*plan, {});
    ASSERT_TRUE(loader);
    ASSERT_TRUE(loader->StartTrace(file.string()));
    auto next = loader->Next();
    ASSERT_TRUE(next && *next);
  }
  const json j = json::parse(ReadTextFile(file));
  EXPECT_TRUE(std::any_of(j.at("traceEvents").begin(), j.at("traceEvents").end(),
                          [](const json& e) { return e.at("name") == "next"; }));
}

}  // namespace
}  // namespace sluice

namespace sluice {
namespace {

// LoaderOptions::trace_path starts the trace before the first sample: every
// sample of the epoch has its "sample" span (a StartTrace after Create
// missed the batches already under way, as `sluice run --trace` did).
TEST(TraceLoaderTest, ATraceFromCreateHoldsEverySample) {
  SLUICE_REQUIRE_TEST_PLAN();
  ScopedDir data("trace_from_create");
  MakeDataset(data.path(), 24);
  const fs::path file = data.path() / "run.json";
  Loader loader = MakeSingleRankLoader(TestPlan().path, data.path(), 2, file);
  auto epoch = ReadEpoch(loader);
  ASSERT_TRUE(epoch) << epoch.error().ToString();
  ASSERT_TRUE(loader.StopTrace());
  std::set<uint64_t> delivered, traced;
  for (const auto& batch : epoch->samples) delivered.insert(batch.begin(), batch.end());
  const nlohmann::json j = nlohmann::json::parse(ReadTextFile(file));
  for (const nlohmann::json& e : j.at("traceEvents")) {
    if (e.at("ph") == "X" && e.at("name") == "sample") {
      traced.insert(e.at("args").at("index").get<uint64_t>());
    }
  }
  for (uint64_t s : delivered) EXPECT_TRUE(traced.contains(s)) << "no sample span for " << s;
}

}  // namespace
}  // namespace sluice
