// Progress bars for long operations (pack, inspect --data, tune, profile,
// compile): drawn in place on stderr when stderr is a terminal, and nothing at
// all otherwise, so that logs and pipes stay quiet. What an operation wants to
// say when not on a terminal goes through common/log.h instead.
//
//   Progress bar("pack", total, "samples");
//   ... bar.Update(done) ...      // from any thread
//   bar.Finish();                 // or let the destructor do it
//
// A count bar shows `LABEL [####......] DONE/TOTAL UNIT  RATE/s  NOTE`. A timed
// bar (StartTicker) redraws itself from a thread every 200 ms and shows the
// elapsed seconds, against `total` seconds when total > 0:
// `LABEL [####......] 12/30 s  NOTE`. With `delay_seconds` nothing is drawn
// until the operation has run that long (compile: a quick compile shows none).
//
// Thread safety: Update, SetNote and Finish may be called from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace sluice {

struct ProgressOptions {
  std::FILE* stream = nullptr;  // nullptr: stderr
  std::optional<bool> tty;      // nullopt: isatty(fileno(stream))
  double delay_seconds = 0;     // draw nothing before the operation has run this long
  double redraw_seconds = 0.1;  // a count bar redraws at most this often (not the last draw)
};

class Progress {
 public:
  // `total` 0: unknown (a count bar shows only the count; a timed bar only
  // the elapsed time).
  Progress(std::string label, uint64_t total, std::string unit, ProgressOptions options = {});
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // True when the bar draws (the stream is a terminal).
  bool active() const { return tty_; }

  void Update(uint64_t done);
  void SetTotal(uint64_t total);
  void SetNote(std::string note);
  // Timed mode: a thread redraws the elapsed time until Finish. Does nothing
  // when the bar is not active.
  void StartTicker();
  // Erases the bar's line (on a terminal, when drawn) so that the caller can
  // print a line of its own; the next Update or tick draws the bar again.
  void Clear();
  // Draws the final state and ends the line (when anything was drawn); stops
  // the ticker. Idempotent.
  void Finish();

 private:
  void DrawLocked(bool final);

  std::string label_, unit_;
  ProgressOptions options_;
  std::FILE* stream_;
  bool tty_ = false;
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t total_ = 0, done_ = 0;
  std::string note_;
  bool timed_ = false, drawn_ = false, finished_ = false;
  std::chrono::steady_clock::time_point start_, last_draw_;
  std::thread ticker_;
};

}  // namespace sluice
