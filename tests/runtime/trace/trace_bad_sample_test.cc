// A real loader's trace of an epoch with a corrupt file (the test plan's
// on_error is skip): the bad file's failed attempt is in the trace. Its
// read and its failed decode (error "corrupt_data", a reason) lie in a "bad
// sample" span with the bad file's index and path, inside the "sample" span
// of the slot it was meant for, which names the replacement that filled the
// slot. Every slot has exactly one "sample" span, with the index delivered.
#include <gtest/gtest.h>

#include <algorithm>
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
  int64_t ts = 0, end = 0;  // nanoseconds
  json args;
  bool Encloses(const Span& s) const { return ts <= s.ts && s.end <= end; }
};

// The complete spans of `file`, by track.
std::map<int, std::vector<Span>> ReadSpans(const fs::path& file) {
  const json j = json::parse(ReadTextFile(file));
  std::map<int, std::vector<Span>> tracks;
  for (const json& e : j.at("traceEvents")) {
    if (e.at("ph") != "X") continue;
    const int64_t ts = std::llround(e.at("ts").get<double>() * 1e3);
    const int64_t dur = std::llround(e.at("dur").get<double>() * 1e3);
    tracks[e.at("tid").get<int>()].push_back({e.at("name"), ts, ts + dur, e.at("args")});
  }
  return tracks;
}

TEST(TraceBadSampleTest, AFailedAttemptIsTracedInsideTheSlotItsReplacementFilled) {
  SLUICE_REQUIRE_TEST_PLAN();
  ScopedDir data("trace_bad");
  const std::vector<std::string> paths = MakeDataset(data.path(), 16);
  const std::string bad_path = paths[5];
  WriteBytes(bad_path, {'n', 'o', 't', ' ', 'a', ' ', 'j', 'p', 'e', 'g'});
  const fs::path file = data.path() / "run.json";
  Loader loader = MakeSingleRankLoader(TestPlan().path, data.path(), 2, file);
  auto epoch = ReadEpoch(loader);
  ASSERT_TRUE(epoch) << epoch.error().ToString();
  ASSERT_TRUE(loader.StopTrace());
  std::multiset<uint64_t> delivered;
  for (const auto& batch : epoch->samples) delivered.insert(batch.begin(), batch.end());

  std::multiset<uint64_t> sampled;
  int bad_attempts = 0;
  for (const auto& [tid, spans] : ReadSpans(file)) {
    for (const Span& s : spans) {
      if (s.name == "sample") {
        ASSERT_TRUE(s.args.contains("index")) << s.args.dump();
        EXPECT_NE(s.args.at("path"), bad_path);
        sampled.insert(s.args.at("index").get<uint64_t>());
      }
      if (s.name != "bad sample") continue;
      ++bad_attempts;
      EXPECT_EQ(s.args.at("path"), bad_path);
      EXPECT_EQ(s.args.at("error"), "corrupt_data");
      EXPECT_FALSE(s.args.at("reason").get<std::string>().empty());
      EXPECT_EQ(s.args.at("reason").get<std::string>().find(bad_path), std::string::npos);
      const uint64_t bad_index = s.args.at("index");
      // Its read (good bytes) and its failed decode, with the bad index.
      std::set<std::string> steps;
      for (const Span& c : spans) {
        if (c.name == "sample" || c.name == "bad sample" || !s.Encloses(c)) continue;
        EXPECT_EQ(c.args.at("index"), bad_index) << c.name;
        steps.insert(c.name + (c.args.contains("error") ? " failed" : ""));
      }
      EXPECT_EQ(steps, (std::set<std::string>{"read", "decode failed"}));
      // The slot's sample span encloses it and names the replacement.
      const auto slot = std::find_if(spans.begin(), spans.end(), [&](const Span& p) {
        return p.name == "sample" && p.Encloses(s);
      });
      ASSERT_NE(slot, spans.end());
      EXPECT_NE(slot->args.at("index"), bad_index);
    }
  }
  EXPECT_GE(bad_attempts, 1);
  EXPECT_EQ(sampled, delivered);  // one sample span per slot, with what it holds
}

}  // namespace
}  // namespace sluice
