// TraceRecorder: see trace_recorder.h for the contract. The file format is
// Chrome's trace-event JSON ("JSON Object Format"): complete events (ph X),
// counters (ph C), async begin/end (ph b/e) and thread-name metadata (ph M),
// timestamps in microseconds from Start.
#include "runtime/trace/trace_recorder.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iterator>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/utf8.h"

namespace sluice::runtime {
namespace {

// JSON string body for `s`: quotes, backslashes and control bytes escaped,
// UTF-8 (names in any script) kept as it is, and a byte that is not UTF-8
// (a Latin-1 file name) written as U+FFFD, as Sluice's other JSON does.
void AppendEscaped(std::string& out, std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else if (c >= 0x80) {
      if (const size_t n = Utf8SequenceAt(s, i); n > 0) {
        out.append(s.substr(i, n));
        i += n;
        continue;
      }
      out += "\\ufffd";
    } else {
      out += static_cast<char>(c);
    }
    ++i;
  }
}

}  // namespace

TraceRecorder::TraceRecorder(int workers, std::function<std::string(uint64_t)> name_sample)
    : name_sample_(std::move(name_sample)),
      tracks_(static_cast<size_t>(kFirstWorkerTrack + workers)) {}

TraceRecorder::~TraceRecorder() {
  if (file_ == nullptr) return;
  std::fclose(file_);  // never stopped: `path_` is left as it was
  if (write_path_ != path_) std::remove(write_path_.c_str());
}

const char* TraceRecorder::ArgName(const char* span, int which) {
  struct Names {
    std::string_view span;
    const char* a1;
    const char* a2;
  };
  static constexpr Names kNames[] = {
      {"sample", "batch", "slot"},     {"read", "attempt", "a2"},
      {"decode", "attempt", "a2"},     {"kernel", "field", "attempt"},
      {"next", "batch", "a2"},         {"batch", "epoch", "batch"},
      {"device copy", "batch", "a2"},  {"device sync", "batch", "a2"},
      {"bad sample", "attempt", "a2"},
  };
  for (const Names& n : kNames) {
    if (n.span == span) return which == 1 ? n.a1 : n.a2;
  }
  return which == 1 ? "a1" : "a2";
}

Status TraceRecorder::Start(const std::string& path, size_t max_events) {
  if (file_ != nullptr) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "a trace is already being written to `" + path_ + "`",
                     "stop it (stop_trace / StopTrace) before starting another");
  }
  // Events go to `path`.tmp, renamed over `path` by Stop: `path` is never
  // left truncated or half written. A path that names something other than a
  // regular file (/dev/stdout, a FIFO) is written directly.
  struct stat st {};
  const bool special = ::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode);
  const std::string write_path = special ? path : path + ".tmp";
  std::FILE* f = std::fopen(write_path.c_str(), "w");
  if (f == nullptr) {
    return MakeError(ErrorCode::kIo,
                     "cannot open trace file `" + write_path + "`: " + std::strerror(errno));
  }
  if (max_events == 0) max_events = kDefaultMaxEvents;
  if (max_events != capacity_) {
    for (size_t i = 0; i < tracks_.size(); ++i) {
      tracks_[i].capacity = i == kSchedulerTrack ? kSchedulerFactor * max_events : max_events;
      tracks_[i].events = std::make_unique<Event[]>(tracks_[i].capacity);
      tracks_[i].note_capacity = std::max<size_t>(64, max_events / 64);
      tracks_[i].notes = std::make_unique<char[]>(tracks_[i].note_capacity * kNoteBytes);
    }
    capacity_ = max_events;
  }
  for (Track& t : tracks_) {
    t.count.store(0, std::memory_order_relaxed);
    t.dropped = 0;
    t.note_count = 0;
  }
  file_ = f;
  path_ = path;
  write_path_ = write_path;
  start_ns_ = Ns(Clock::now());
  on_.store(true, std::memory_order_seq_cst);
  return Ok();
}

void TraceRecorder::Record(int track, Event e, std::string_view note) {
  Track& t = tracks_[static_cast<size_t>(track)];
  // Dekker with Stop: announce the write, then re-check that recording is on.
  t.writing.store(true, std::memory_order_seq_cst);
  // A span that began before Start is left out (its parent may be missing);
  // start_ns_ is ordered before this by the seq_cst load of on_.
  if (on_.load(std::memory_order_seq_cst) && (e.kind != Kind::kSpan || e.ts_ns >= start_ns_)) {
    const size_t n = t.count.load(std::memory_order_relaxed);
    if (n < t.capacity) {
      if (e.error != 0 && t.note_count < t.note_capacity) {
        // Cut on a UTF-8 sequence boundary (no continuation byte left dangling).
        size_t len = std::min(note.size(), kNoteBytes - 1);
        if (len < note.size()) {
          while (len > 0 && (static_cast<unsigned char>(note[len]) & 0xC0) == 0x80) --len;
        }
        char* slot = t.notes.get() + t.note_count * kNoteBytes;
        std::memcpy(slot, note.data(), len);
        slot[len] = '\0';
        e.note = static_cast<int32_t>(t.note_count++);
      }
      t.events[n] = e;
      t.count.store(n + 1, std::memory_order_release);
    } else {
      ++t.dropped;
    }
  }
  t.writing.store(false, std::memory_order_release);
}

Result<uint64_t> TraceRecorder::Stop() {
  if (file_ == nullptr) {
    return MakeError(ErrorCode::kInvalidArgument, "no trace is running",
                     "start one with start_trace(path) / StartTrace(path)");
  }
  on_.store(false, std::memory_order_seq_cst);
  for (Track& t : tracks_) {
    while (t.writing.load(std::memory_order_seq_cst)) std::this_thread::yield();
  }
  uint64_t dropped = 0;
  Status written = Write(dropped);
  const bool closed = std::fclose(file_) == 0;
  file_ = nullptr;
  const bool renamed =
      closed && static_cast<bool>(written) &&
      (write_path_ == path_ || std::rename(write_path_.c_str(), path_.c_str()) == 0);
  const int rename_errno = errno;
  if (!renamed && write_path_ != path_) std::remove(write_path_.c_str());
  if (!written) return std::unexpected(written.error());
  if (!closed) return MakeError(ErrorCode::kIo, "cannot write trace file `" + write_path_ + "`");
  if (!renamed) {
    return MakeError(ErrorCode::kIo, "cannot rename trace file `" + write_path_ + "` to `" + path_ +
                                         "`: " + std::strerror(rename_errno));
  }
  return dropped;
}

// Which of a track's events to write: all, except a sample's child spans
// ("read", "decode", "kernel") that no kept "sample" or "bad sample" span of
// the same index on the same track encloses, and "bad sample" spans that no
// "sample" span on the track encloses. The loader records a sample's
// children before the sample span itself (a bad attempt's children, then its
// "bad sample" span, then the slot's "sample"), so a sample cut off by
// StopTrace (or by a full buffer) leaves children without a parent; they are
// not written.
std::vector<bool> TraceRecorder::SpansWithParents(const Event* events, size_t n) {
  auto named = [](const Event& e, const char* name) {
    return e.kind == Kind::kSpan && std::strcmp(e.name, name) == 0;
  };
  auto is_child = [&](const Event& e) {
    return e.index != kNoIndex && (named(e, "read") || named(e, "decode") || named(e, "kernel"));
  };
  auto encloses = [](const Event& p, const Event& e) {
    return p.ts_ns <= e.ts_ns && e.ts_ns + e.dur_ns <= p.ts_ns + p.dur_ns;
  };
  // A track's "sample" spans do not overlap: sorted by start, the one that
  // may enclose an event is the last that starts at or before it.
  std::vector<const Event*> samples;
  for (size_t i = 0; i < n; ++i) {
    if (named(events[i], "sample")) samples.push_back(&events[i]);
  }
  std::sort(samples.begin(), samples.end(),
            [](const Event* a, const Event* b) { return a->ts_ns < b->ts_ns; });
  auto in_sample = [&](const Event& e) {
    auto it = std::upper_bound(samples.begin(), samples.end(), e.ts_ns,
                               [](int64_t ts, const Event* p) { return ts < p->ts_ns; });
    return it != samples.begin() && encloses(**std::prev(it), e);
  };
  std::vector<bool> keep(n, true);
  std::unordered_multimap<uint64_t, const Event*> parents;  // by index
  for (size_t i = 0; i < n; ++i) {
    const Event& e = events[i];
    if (named(e, "bad sample")) keep[i] = in_sample(e);
    if ((named(e, "sample") || named(e, "bad sample")) && keep[i] && e.index != kNoIndex) {
      parents.emplace(e.index, &e);
    }
  }
  for (size_t i = 0; i < n; ++i) {
    const Event& e = events[i];
    if (!is_child(e)) continue;
    bool enclosed = false;
    auto [lo, hi] = parents.equal_range(e.index);
    for (auto it = lo; it != hi && !enclosed; ++it) enclosed = encloses(*it->second, e);
    keep[i] = enclosed;
  }
  return keep;
}

// `e`'s arguments and the end of its JSON object (from after "args":{).
void TraceRecorder::AppendArgs(std::string& out, const Event& e, const Track& t) const {
  bool comma = false;
  auto key = [&](const char* name) {
    out += std::string(comma ? ",\"" : "\"") + name + "\":";
    comma = true;
  };
  if (e.kind == Kind::kSpan && e.index != kNoIndex) {
    key("index");
    out += std::to_string(e.index) + ",\"path\":\"";
    AppendEscaped(out, name_sample_(e.index));
    out += "\"";
  }
  if (e.a1 >= 0) {
    key(ArgName(e.name, 1));
    out += std::to_string(e.a1);
  }
  if (e.a2 >= 0) {
    key(ArgName(e.name, 2));
    out += std::to_string(e.a2);
  }
  if (e.kind != Kind::kSpan || e.error == 0) {
    out += "}}";
    return;
  }
  key("error");
  out += std::string("\"") + ErrorCodeName(static_cast<ErrorCode>(e.error - 1)) + "\"";
  if (e.note >= 0) {
    out += ",\"reason\":\"";
    AppendEscaped(out, t.notes.get() + static_cast<size_t>(e.note) * kNoteBytes);
    out += "\"";
  }
  out += "},\"cname\":\"terrible\"}";  // chrome://tracing draws it red
}

Status TraceRecorder::Write(uint64_t& dropped) {
  const int pid = static_cast<int>(::getpid());
  std::string out;
  out.reserve(1 << 20);
  out += "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "{\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"name\":\"process_name\","
                "\"args\":{\"name\":\"sluice loader\"}}",
                pid);
  out += buf;
  for (size_t tr = 0; tr < tracks_.size(); ++tr) {
    std::string name = tr == kConsumerTrack    ? "consumer (Next)"
                       : tr == kSchedulerTrack ? "scheduler"
                                               : "worker " + std::to_string(tr - kFirstWorkerTrack);
    std::snprintf(buf, sizeof buf,
                  ",\n{\"ph\":\"M\",\"pid\":%d,\"tid\":%zu,\"name\":\"thread_name\","
                  "\"args\":{\"name\":\"%s\"}},\n{\"ph\":\"M\",\"pid\":%d,\"tid\":%zu,"
                  "\"name\":\"thread_sort_index\",\"args\":{\"sort_index\":%zu}}",
                  pid, tr, name.c_str(), pid, tr, tr);
    out += buf;
  }
  std::string dropped_json;
  for (size_t tr = 0; tr < tracks_.size(); ++tr) {
    const Track& t = tracks_[tr];
    const size_t n = t.count.load(std::memory_order_acquire);
    dropped += t.dropped;
    dropped_json += (tr == 0 ? "" : ",") + std::to_string(t.dropped);
    const std::vector<bool> keep = SpansWithParents(t.events.get(), n);
    for (size_t i = 0; i < n; ++i) {
      if (!keep[i]) continue;
      const Event& e = t.events[i];
      const double ts = static_cast<double>(e.ts_ns - start_ns_) * 1e-3;
      out += ",\n{\"name\":\"";
      AppendEscaped(out, e.name);
      switch (e.kind) {
        case Kind::kSpan:
          std::snprintf(buf, sizeof buf,
                        "\",\"cat\":\"loader\",\"ph\":\"X\",\"pid\":%d,\"tid\":%zu,\"ts\":%.3f,"
                        "\"dur\":%.3f,\"args\":{",
                        pid, tr, ts, static_cast<double>(e.dur_ns) * 1e-3);
          break;
        case Kind::kCounter:
          std::snprintf(
              buf, sizeof buf,
              "\",\"ph\":\"C\",\"pid\":%d,\"tid\":%zu,\"ts\":%.3f,\"args\":{\"value\":%lld}}", pid,
              tr, ts, static_cast<long long>(e.a1));
          out += buf;
          continue;
        case Kind::kAsyncBegin:
        case Kind::kAsyncEnd:
          std::snprintf(buf, sizeof buf,
                        "\",\"cat\":\"batch\",\"ph\":\"%s\",\"id\":%llu,\"pid\":%d,\"tid\":%zu,"
                        "\"ts\":%.3f,\"args\":{",
                        e.kind == Kind::kAsyncBegin ? "b" : "e",
                        static_cast<unsigned long long>(e.index), pid, tr, ts);
          break;
      }
      out += buf;
      AppendArgs(out, e, t);
      if (out.size() > (1 << 20)) {
        if (std::fwrite(out.data(), 1, out.size(), file_) != out.size()) break;
        out.clear();
      }
    }
  }
  std::snprintf(buf, sizeof buf, "\n],\"otherData\":{\"max_events_per_track\":%zu,", capacity_);
  out += buf;
  out += "\"dropped_events_per_track\":[" + dropped_json +
         "],\"dropped_events\":" + std::to_string(dropped) + "}}\n";
  if (std::fwrite(out.data(), 1, out.size(), file_) != out.size() || std::ferror(file_)) {
    return MakeError(ErrorCode::kIo,
                     "cannot write trace file `" + write_path_ + "`: " + std::strerror(errno));
  }
  return Ok();
}

}  // namespace sluice::runtime
static_assert(sizeof(sluice::runtime::TraceRecorder::Event) == 56, "docs say 56 bytes per event");
