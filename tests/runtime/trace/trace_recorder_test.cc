// TraceRecorder on its own: the file is Chrome trace-event JSON with named
// tracks, spans carry their arguments (index, path, named a1/a2), counters and
// async pairs are written, a full track drops and counts its later events,
// Start/Stop misuse and unwritable paths are errors, a trace can be
// restarted, and the file is replaced at Stop (never truncated at Start).
#include "runtime/trace/trace_recorder.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>
#include <vector>

namespace sluice::runtime {
namespace {

namespace fs = std::filesystem;
using Clock = TraceRecorder::Clock;

nlohmann::json ReadJson(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return nlohmann::json::parse(text.str());
}

std::string Name(uint64_t index) { return "dir/\"q\"\\x" + std::to_string(index) + ".jpg"; }

fs::path TempFile(const std::string& name) {
  return fs::temp_directory_path() / (name + "_" + std::to_string(::getpid()) + ".json");
}

TEST(TraceRecorderTest, WritesSpansCountersAsyncAndThreadNames) {
  TraceRecorder trace(2, Name);
  const fs::path path = TempFile("trace_basic");
  ASSERT_TRUE(trace.Start(path.string()));
  EXPECT_TRUE(trace.on());
  const Clock::time_point t0 = Clock::now();
  trace.Span(TraceRecorder::kFirstWorkerTrack + 1, "sample", t0, t0 + std::chrono::microseconds(9),
             7, 3, 2);
  trace.Span(TraceRecorder::kFirstWorkerTrack + 1, "read", t0, t0 + std::chrono::microseconds(2),
             7);
  trace.Counter("in-flight samples", t0, 5);
  trace.Async(true, "batch", t0, 11, 0, 3);
  trace.Async(false, "batch", t0 + std::chrono::microseconds(20), 11, 0, 3);
  auto dropped = trace.Stop();
  ASSERT_TRUE(dropped) << dropped.error().ToString();
  EXPECT_EQ(*dropped, 0u);
  EXPECT_FALSE(trace.on());
  // Off: recording calls are ignored.
  trace.Span(TraceRecorder::kConsumerTrack, "next", t0, t0);

  nlohmann::json j = ReadJson(path);
  fs::remove(path);
  std::map<int, std::string> threads;
  int spans = 0, counters = 0, begins = 0, ends = 0;
  for (const auto& e : j["traceEvents"]) {
    const std::string ph = e["ph"];
    if (ph == "M" && e["name"] == "thread_name") threads[e["tid"]] = e["args"]["name"];
    if (ph == "X") {
      ++spans;
      EXPECT_EQ(e["tid"], 3);
      EXPECT_EQ(e["args"]["index"], 7);
      EXPECT_EQ(e["args"]["path"], Name(7));  // escaped and parsed back
      if (e["name"] == "sample") {
        EXPECT_DOUBLE_EQ(e["dur"].get<double>(), 9.0);
        EXPECT_EQ(e["args"]["batch"], 3);
        EXPECT_EQ(e["args"]["slot"], 2);
      }
    }
    if (ph == "C") {
      ++counters;
      EXPECT_EQ(e["name"], "in-flight samples");
      EXPECT_EQ(e["args"]["value"], 5);
    }
    if (ph == "b" || ph == "e") {
      (ph == "b" ? begins : ends)++;
      EXPECT_EQ(e["id"], 11);
      EXPECT_EQ(e["args"]["batch"], 3);
    }
  }
  EXPECT_EQ(spans, 2);
  EXPECT_EQ(counters, 1);
  EXPECT_EQ(begins, 1);
  EXPECT_EQ(ends, 1);
  ASSERT_EQ(threads.size(), 4u);
  EXPECT_EQ(threads[0], "consumer (Next)");
  EXPECT_EQ(threads[1], "scheduler");
  EXPECT_EQ(threads[2], "worker 0");
  EXPECT_EQ(threads[3], "worker 1");
  EXPECT_EQ(j["otherData"]["dropped_events"], 0);
}

// Names in any script stay as they are (猫 was written byte by byte as
// Latin-1 code points); a byte that is not UTF-8 becomes U+FFFD; quotes and
// control bytes are escaped. The file parses as JSON either way.
TEST(TraceRecorderTest, SampleNamesKeepTheirUtf8) {
  const std::vector<std::string> names = {"\xe7\x8c\xab_1.jpg", "caf\xe9.jpg", "a\"b\\c\n.jpg",
                                          "\xed\xa0\x80.jpg", "\xf0\x9f\x90\x88.png"};
  const std::vector<std::string> parsed = {
      "\xe7\x8c\xab_1.jpg", "caf\xef\xbf\xbd.jpg", "a\"b\\c\n.jpg",
      "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd.jpg", "\xf0\x9f\x90\x88.png"};
  TraceRecorder trace(1, [&](uint64_t i) { return names[i]; });
  const fs::path path = TempFile("trace_utf8");
  ASSERT_TRUE(trace.Start(path.string()));
  const Clock::time_point t0 = Clock::now();
  for (uint64_t i = 0; i < names.size(); ++i) {
    trace.Span(TraceRecorder::kFirstWorkerTrack, "sample", t0, t0 + std::chrono::microseconds(1), i,
               0, 0);
  }
  ASSERT_TRUE(trace.Stop());
  nlohmann::json j = ReadJson(path);
  fs::remove(path);
  std::vector<std::string> got;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "X") got.push_back(e["args"]["path"]);
  }
  EXPECT_EQ(got, parsed);
}

TEST(TraceRecorderTest, ChildSpansWithoutTheirSampleSpanAreNotWritten) {
  TraceRecorder trace(1, Name);
  const fs::path path = TempFile("trace_orphans");
  ASSERT_TRUE(trace.Start(path.string()));
  const Clock::time_point t0 = Clock::now();
  auto us = [&](int n) { return t0 + std::chrono::microseconds(n); };
  const int w = TraceRecorder::kFirstWorkerTrack;
  trace.Span(w, "read", us(0), us(2), 4);  // sample 4: children, then the sample
  trace.Span(w, "decode", us(2), us(5), 4);
  trace.Span(w, "sample", us(0), us(6), 4);
  trace.Span(w, "read", us(7), us(9), 5);    // sample 5 cut off: no sample span
  trace.Span(w, "read", us(10), us(12), 4);  // index 4 again, outside its span
  ASSERT_TRUE(trace.Stop());
  nlohmann::json j = ReadJson(path);
  fs::remove(path);
  std::vector<std::string> written;  // name:index@microseconds after the sample began
  double sample_ts = -1;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "X" && e["name"] == "sample") sample_ts = e["ts"].get<double>();
  }
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "X") {
      written.push_back(e["name"].get<std::string>() + ":" +
                        std::to_string(e["args"]["index"].get<int>()) + "@" +
                        std::to_string(std::lround(e["ts"].get<double>() - sample_ts)));
    }
  }
  EXPECT_EQ(written, (std::vector<std::string>{"read:4@0", "decode:4@2", "sample:4@0"}));
}

// A bad sample's attempt: its failed read/decode spans are written inside its
// "bad sample" span (same index: the bad file), which lies in the slot's
// "sample" span (the replacement's index). Failed spans carry "error" (the
// code's name) and "reason"; a "bad sample" with no "sample" around it (cut
// off by Stop) is left out with its children.
TEST(TraceRecorderTest, FailedAttemptsAreWrittenInsideTheirSample) {
  TraceRecorder trace(1, Name);
  const fs::path path = TempFile("trace_failed");
  ASSERT_TRUE(trace.Start(path.string()));
  const Clock::time_point t0 = Clock::now();
  auto us = [&](int n) { return t0 + std::chrono::microseconds(n); };
  const int w = TraceRecorder::kFirstWorkerTrack;
  trace.Span(w, "read", us(0), us(1), 4);
  trace.FailedSpan(w, "decode", us(1), us(3), ErrorCode::kCorruptData, "JPEG header: \x1b bad", 4);
  trace.FailedSpan(w, "bad sample", us(0), us(3), ErrorCode::kCorruptData, "JPEG header: bad", 4,
                   0);
  trace.Span(w, "read", us(3), us(4), 9, 1);  // the replacement, attempt 1
  trace.Span(w, "decode", us(4), us(6), 9, 1);
  trace.Span(w, "sample", us(0), us(7), 9, 0, 2);
  trace.FailedSpan(w, "read", us(8), us(9), ErrorCode::kIo, "timed out", 5);  // cut off
  trace.FailedSpan(w, "bad sample", us(8), us(9), ErrorCode::kIo, "timed out", 5, 0);
  ASSERT_TRUE(trace.Stop());
  nlohmann::json j = ReadJson(path);
  fs::remove(path);
  std::vector<std::string> written;  // name:index[:error:reason]
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] != "X") continue;
    std::string s =
        e["name"].get<std::string>() + ":" + std::to_string(e["args"]["index"].get<int>());
    if (e["args"].contains("attempt"))
      s += ":attempt " + std::to_string(e["args"]["attempt"].get<int>());
    if (e["args"].contains("error")) {
      s += ":" + e["args"]["error"].get<std::string>() + ":" +
           e["args"]["reason"].get<std::string>();
      EXPECT_EQ(e["cname"], "terrible");
      EXPECT_EQ(e["args"]["path"], Name(4));
    }
    written.push_back(s);
  }
  EXPECT_EQ(written,
            (std::vector<std::string>{"read:4", "decode:4:corrupt_data:JPEG header: \x1b bad",
                                      "bad sample:4:attempt 0:corrupt_data:JPEG header: bad",
                                      "read:9:attempt 1", "decode:9:attempt 1", "sample:9"}));
}

// A failed span's reason is cut to kNoteBytes - 1 bytes without splitting a
// UTF-8 sequence; once the track's notes are used up, failed spans keep
// their error code without a reason.
TEST(TraceRecorderTest, FailedSpanReasonsAreBounded) {
  TraceRecorder trace(1, Name);
  const fs::path path = TempFile("trace_reasons");
  ASSERT_TRUE(trace.Start(path.string(), 128));  // 64 notes per track (the minimum)
  const Clock::time_point t0 = Clock::now();
  std::string reason(TraceRecorder::kNoteBytes - 2, 'x');
  reason += "\xe7\x8c\xab";  // 猫 across the cut
  trace.FailedSpan(TraceRecorder::kConsumerTrack, "next", t0, t0, ErrorCode::kIo, reason);
  for (int i = 0; i < 70; ++i) {
    trace.FailedSpan(TraceRecorder::kConsumerTrack, "wait", t0, t0, ErrorCode::kIo, "r");
  }
  ASSERT_TRUE(trace.Stop());
  nlohmann::json j = ReadJson(path);
  fs::remove(path);
  int with_reason = 0, without = 0;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] != "X") continue;
    EXPECT_EQ(e["args"]["error"], "io");
    if (e["name"] == "next") {
      EXPECT_EQ(e["args"]["reason"], std::string(TraceRecorder::kNoteBytes - 2, 'x'));
    } else {
      (e["args"].contains("reason") ? with_reason : without)++;
    }
  }
  EXPECT_EQ(with_reason, 63);  // the first note went to "next"
  EXPECT_EQ(without, 70 - 63);
}

TEST(TraceRecorderTest, FullTrackKeepsItsFirstEventsAndCountsTheRest) {
  TraceRecorder trace(1, Name);
  const fs::path path = TempFile("trace_full");
  ASSERT_TRUE(trace.Start(path.string(), 4));
  const Clock::time_point t0 = Clock::now();
  for (int i = 0; i < 10; ++i) {
    trace.Span(TraceRecorder::kFirstWorkerTrack, "sample", t0 + std::chrono::microseconds(i),
               t0 + std::chrono::microseconds(i + 1), static_cast<uint64_t>(i));
  }
  trace.Span(TraceRecorder::kConsumerTrack, "next", t0, t0);
  auto dropped = trace.Stop();
  ASSERT_TRUE(dropped);
  EXPECT_EQ(*dropped, 6u);
  nlohmann::json j = ReadJson(path);
  fs::remove(path);
  std::vector<int> kept;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "X" && e["name"] == "sample") kept.push_back(e["args"]["index"]);
  }
  EXPECT_EQ(kept, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(j["otherData"]["dropped_events"], 6);
  EXPECT_EQ(j["otherData"]["dropped_events_per_track"], (std::vector<int>{0, 0, 6}));
}

TEST(TraceRecorderTest, MisuseAndUnwritablePathsAreErrors) {
  TraceRecorder trace(1, Name);
  auto stop = trace.Stop();
  ASSERT_FALSE(stop);
  EXPECT_EQ(stop.error().code, ErrorCode::kInvalidArgument);
  Status bad = trace.Start("/nonexistent_dir_for_sluice/trace.json");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ErrorCode::kIo);
  EXPECT_FALSE(trace.on());
  const fs::path path = TempFile("trace_twice");
  ASSERT_TRUE(trace.Start(path.string()));
  Status twice = trace.Start(path.string());
  ASSERT_FALSE(twice);
  EXPECT_EQ(twice.error().code, ErrorCode::kInvalidArgument);
  ASSERT_TRUE(trace.Stop());
  // A second trace starts empty.
  ASSERT_TRUE(trace.Start(path.string()));
  const Clock::time_point t0 = Clock::now();
  trace.Span(TraceRecorder::kConsumerTrack, "next", t0, t0);
  ASSERT_TRUE(trace.Stop());
  nlohmann::json j = ReadJson(path);
  fs::remove(path);
  int spans = 0;
  for (const auto& e : j["traceEvents"]) spans += e["ph"] == "X";
  EXPECT_EQ(spans, 1);
}

// The file is written to PATH.tmp and renamed over PATH at Stop: PATH keeps
// its old contents until then, and a recorder destroyed without Stop (a
// process that dies mid-run) leaves PATH as it was and no .tmp behind.
TEST(TraceRecorderTest, PathIsReplacedAtStopNotTruncatedAtStart) {
  const fs::path path = TempFile("trace_replace");
  const fs::path tmp = path.string() + ".tmp";
  std::ofstream(path) << "old";
  {
    TraceRecorder trace(1, Name);
    ASSERT_TRUE(trace.Start(path.string()));
    EXPECT_EQ(fs::file_size(path), 3u);
    EXPECT_TRUE(fs::exists(tmp));
  }
  EXPECT_EQ(fs::file_size(path), 3u);
  EXPECT_FALSE(fs::exists(tmp));
  TraceRecorder trace(1, Name);
  ASSERT_TRUE(trace.Start(path.string()));
  const Clock::time_point t0 = Clock::now();
  trace.Span(TraceRecorder::kConsumerTrack, "next", t0, t0);
  ASSERT_TRUE(trace.Stop());
  EXPECT_FALSE(fs::exists(tmp));
  nlohmann::json j = ReadJson(path);
  fs::remove(path);
  EXPECT_TRUE(j["traceEvents"].is_array());
}

TEST(TraceRecorderTest, StopWhileWritersRunKeepsTheFileValid) {
  TraceRecorder trace(4, Name);
  const fs::path path = TempFile("trace_race");
  ASSERT_TRUE(trace.Start(path.string(), 1 << 12));
  std::atomic<bool> go{true};
  std::vector<std::thread> writers;
  for (int w = 0; w < 4; ++w) {
    writers.emplace_back([&, w] {
      while (go.load()) {
        const Clock::time_point t = Clock::now();
        trace.Span(TraceRecorder::kFirstWorkerTrack + w, "decode", t, t, 1);
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  auto dropped = trace.Stop();
  go.store(false);
  for (std::thread& t : writers) t.join();
  ASSERT_TRUE(dropped);
  nlohmann::json j = ReadJson(path);  // throws (test fails) on a torn file
  fs::remove(path);
  EXPECT_TRUE(j["traceEvents"].is_array());
}

}  // namespace
}  // namespace sluice::runtime
