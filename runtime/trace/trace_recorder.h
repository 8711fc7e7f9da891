// TraceRecorder: the loader's Chrome trace-event recorder (docs/observability.md).
//
// Tracks: track 0 is the consumer (the thread calling Next), track 1 the
// loader's scheduler (batch spans and counters, written only under the
// loader's lock), tracks 2.. one per worker loop (LoaderCore::WorkerLoop w ->
// track 2 + w). Each track has exactly one writer at a time (a worker loop
// runs on one thread at a time; the scheduler track is written under the
// loader's mutex; the consumer track by the consumer), so a track's buffer is
// written without locks.
//
// Cost: with tracing off every recording call is one relaxed atomic load and
// a branch (on()). With tracing on an event is a fixed-size copy into the
// track's preallocated buffer plus two stores (no heap allocation, no lock;
// timestamps are steady_clock readings the caller usually already has).
// Sample paths are not copied on the hot path: an event carries the dataset
// index and the path is named (Source::SampleName) when the file is written.
// A failed step (FailedSpan: a bad sample's read or decode, say) carries its
// error code, and its reason is copied into the track's preallocated notes
// (kNoteBytes each; when they are full the span keeps its code, not its reason).
//
// Bounded memory: Start allocates `max_events` events per track (56 bytes
// each; the scheduler track kSchedulerFactor times that) once; when a track's buffer is full its
// later events are dropped and counted (the first events of the run are kept, so spans still nest).
// The file's "otherData" says how many were dropped per track, and Stop returns the total.
//
// Start/Stop: called by one thread (the consumer), never concurrently with
// each other. Stop turns recording off, waits for any writer that is inside a
// recording call (a few instructions; Dekker-style flag per track) and writes
// the JSON file. Spans that began before Start or were still open at Stop are
// not written, and neither are a sample's read/decode/kernel spans that no
// written "sample" or "bad sample" span of the same index encloses, nor a "bad
// sample" span that no written "sample" span encloses (SpansWithParents):
// every child has its parent.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/result.h"

namespace sluice::runtime {

class TraceRecorder {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr int kConsumerTrack = 0;
  static constexpr int kSchedulerTrack = 1;
  static constexpr int kFirstWorkerTrack = 2;
  static constexpr size_t kDefaultMaxEvents = 1 << 16;
  static constexpr uint64_t kNoIndex = ~uint64_t{0};
  // The scheduler track records about 6 counter values per sample (the
  // workers' tracks 4-5 events), so it gets this many times `max_events`.
  static constexpr size_t kSchedulerFactor = 4;

  // A failed span's reason is cut to this many bytes less one (on a UTF-8
  // sequence boundary).
  static constexpr size_t kNoteBytes = 128;

  // Event names are string literals (static storage): the pointer is stored.
  enum class Kind : uint8_t { kSpan, kCounter, kAsyncBegin, kAsyncEnd };
  struct Event {
    const char* name = nullptr;
    Kind kind = Kind::kSpan;
    uint8_t error = 0;   // spans: 0, or 1 + the ErrorCode of a failed step
    int32_t note = -1;   // a failed span's reason: its slot in the track's notes (-1: none)
    int64_t ts_ns = 0;   // steady_clock, absolute
    int64_t dur_ns = 0;  // spans
    // Spans: dataset index (kNoIndex: none; written with its path) and a
    // second argument `a1` (named by the span: slot, batch, ...; -1: none).
    // Counters: the value in a1. Async: id in index, a1 as for spans.
    uint64_t index = kNoIndex;
    int64_t a1 = -1;
    int64_t a2 = -1;
  };

  // `workers`: the number of worker tracks. `name_sample`: names a dataset
  // index for the file (called only by Stop).
  TraceRecorder(int workers, std::function<std::string(uint64_t)> name_sample);
  ~TraceRecorder();

  // Opens `path`.tmp for writing (kIo when it cannot be; `path` itself when
  // it exists and is not a regular file), allocates the buffers
  // on first use (`max_events` per track; 0 = kDefaultMaxEvents) and turns
  // recording on. kInvalidArgument when a trace is already running.
  Status Start(const std::string& path, size_t max_events = 0);
  // Turns recording off, writes the file and renames it over `path` (so
  // `path` is complete or untouched; a recorder destroyed without Stop
  // removes the .tmp file). Returns the number of events
  // dropped because a track's buffer was full. kInvalidArgument when no trace
  // is running, kIo when writing failed.
  Result<uint64_t> Stop();
  bool running() const { return file_ != nullptr; }

  // The hot-path check: one relaxed load.
  bool on() const { return on_.load(std::memory_order_relaxed); }

  // A complete span [begin, end) on `track`. Safe to call when off.
  void Span(int track, const char* name, Clock::time_point begin, Clock::time_point end,
            uint64_t index = kNoIndex, int64_t a1 = -1, int64_t a2 = -1) {
    if (!on()) return;
    Record(track, Event{name, Kind::kSpan, 0, -1, Ns(begin), Ns(end) - Ns(begin), index, a1, a2});
  }
  // A span that failed with `code`: written with "error" (ErrorCodeName) and
  // "reason" (`reason`, cut to kNoteBytes - 1 bytes) arguments. Copies
  // `reason` into a preallocated buffer, no allocation. Safe to call when off.
  void FailedSpan(int track, const char* name, Clock::time_point begin, Clock::time_point end,
                  ErrorCode code, std::string_view reason, uint64_t index = kNoIndex,
                  int64_t a1 = -1, int64_t a2 = -1) {
    if (!on()) return;
    Record(track,
           Event{name, Kind::kSpan, static_cast<uint8_t>(1 + static_cast<int>(code)), -1, Ns(begin),
                 Ns(end) - Ns(begin), index, a1, a2},
           reason);
  }
  // A counter sample on the scheduler track (`name` = its value's series).
  void Counter(const char* name, Clock::time_point at, int64_t value) {
    if (!on()) return;
    Record(kSchedulerTrack, Event{name, Kind::kCounter, 0, -1, Ns(at), 0, kNoIndex, value, -1});
  }
  // An async span (overlapping spans, e.g. batches being filled) begins or ends.
  void Async(bool begin, const char* name, Clock::time_point at, uint64_t id, int64_t a1 = -1,
             int64_t a2 = -1) {
    if (!on()) return;
    Record(kSchedulerTrack,
           Event{name, begin ? Kind::kAsyncBegin : Kind::kAsyncEnd, 0, -1, Ns(at), 0, id, a1, a2});
  }

  // How a span's a1/a2 arguments are named in the file (default "a1"/"a2").
  static const char* ArgName(const char* span, int which);

 private:
  struct Track {
    std::unique_ptr<Event[]> events;
    std::unique_ptr<char[]> notes;  // note_capacity NUL-terminated reasons, kNoteBytes each
    std::atomic<size_t> count{0};
    size_t note_count = 0;  // by the writer; read by Stop after it quiesced
    size_t note_capacity = 0;
    std::atomic<bool> writing{false};
    uint64_t dropped = 0;  // by the writer; read by Stop after it quiesced
    size_t capacity = 0;
  };
  static int64_t Ns(Clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  }
  // Stores `e` (with `note` copied into the track's notes when `e.error`).
  void Record(int track, Event e, std::string_view note = {});
  Status Write(uint64_t& dropped);
  void AppendArgs(std::string& out, const Event& e, const Track& t) const;
  static std::vector<bool> SpansWithParents(const Event* events, size_t n);

  std::function<std::string(uint64_t)> name_sample_;
  std::vector<Track> tracks_;
  size_t capacity_ = 0;
  std::atomic<bool> on_{false};
  std::FILE* file_ = nullptr;
  std::string path_;
  std::string write_path_;  // `path_`.tmp (or `path_` when not a regular file)
  int64_t start_ns_ = 0;
};

// A span timed by its scope (for code that has no timestamps of its own).
class ScopedSpan {
 public:
  ScopedSpan(TraceRecorder& trace, int track, const char* name,
             uint64_t index = TraceRecorder::kNoIndex, int64_t a1 = -1)
      : trace_(trace), track_(track), name_(name), index_(index), a1_(a1), on_(trace.on()) {
    if (on_) begin_ = TraceRecorder::Clock::now();
  }
  ~ScopedSpan() {
    if (on_) trace_.Span(track_, name_, begin_, TraceRecorder::Clock::now(), index_, a1_);
  }
  ScopedSpan(const ScopedSpan&) = delete;
  ScopedSpan& operator=(const ScopedSpan&) = delete;

 private:
  TraceRecorder& trace_;
  int track_;
  const char* name_;
  uint64_t index_;
  int64_t a1_;
  bool on_;
  TraceRecorder::Clock::time_point begin_;
};

}  // namespace sluice::runtime
