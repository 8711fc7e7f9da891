// common/progress.h: the terminal progress bar.
#include "common/progress.h"

#include <unistd.h>

#include <utility>

namespace sluice {
namespace {

constexpr int kWidth = 30;

std::string Bar(double fraction) {
  if (fraction < 0) fraction = 0;
  if (fraction > 1) fraction = 1;
  const int filled = static_cast<int>(fraction * kWidth);
  return "[" + std::string(filled, '#') + std::string(kWidth - filled, '.') + "]";
}

}  // namespace

Progress::Progress(std::string label, uint64_t total, std::string unit, ProgressOptions options)
    : label_(std::move(label)),
      unit_(std::move(unit)),
      options_(options),
      stream_(options.stream != nullptr ? options.stream : stderr),
      total_(total),
      start_(std::chrono::steady_clock::now()) {
  tty_ = options.tty.has_value() ? *options.tty : ::isatty(::fileno(stream_)) != 0;
}

Progress::~Progress() { Finish(); }

void Progress::Update(uint64_t done) {
  if (!tty_) return;
  std::lock_guard lock(mu_);
  if (finished_) return;
  done_ = done;
  const auto now = std::chrono::steady_clock::now();
  const bool last = total_ > 0 && done >= total_;
  if (!last && now - last_draw_ < std::chrono::duration<double>(options_.redraw_seconds)) return;
  DrawLocked(false);
}

void Progress::SetTotal(uint64_t total) {
  std::lock_guard lock(mu_);
  total_ = total;
}

void Progress::SetNote(std::string note) {
  if (!tty_) return;
  std::lock_guard lock(mu_);
  note_ = std::move(note);
}

void Progress::StartTicker() {
  if (!tty_) return;
  std::lock_guard lock(mu_);
  if (timed_ || finished_) return;
  timed_ = true;
  DrawLocked(false);  // at once (unless delayed), then every 200 ms
  ticker_ = std::thread([this] {
    std::unique_lock lock(mu_);
    while (!cv_.wait_for(lock, std::chrono::milliseconds(200), [this] { return finished_; })) {
      DrawLocked(false);
    }
  });
}

void Progress::Clear() {
  if (!tty_) return;
  std::lock_guard lock(mu_);
  if (!drawn_ || finished_) return;
  std::fprintf(stream_, "\r\033[K");
  std::fflush(stream_);
}

void Progress::Finish() {
  {
    std::lock_guard lock(mu_);
    if (finished_) return;
    finished_ = true;
    // A bar never drawn (not a terminal, or quicker than delay_seconds) stays
    // silent; a drawn one shows its final state and ends its line.
    if (tty_ && drawn_) DrawLocked(true);
  }
  cv_.notify_all();
  if (ticker_.joinable()) ticker_.join();
}

void Progress::DrawLocked(bool final) {
  const auto now = std::chrono::steady_clock::now();
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  if (!final && elapsed < options_.delay_seconds) return;
  last_draw_ = now;
  drawn_ = true;
  char numbers[128];
  std::string line = label_ + " ";
  if (timed_) {
    if (total_ > 0) {
      line += Bar(elapsed / static_cast<double>(total_)) + " ";
      std::snprintf(numbers, sizeof numbers, "%.0f/%llu s", elapsed,
                    static_cast<unsigned long long>(total_));
    } else {
      std::snprintf(numbers, sizeof numbers, "%.1f s", elapsed);
    }
  } else {
    if (total_ > 0) line += Bar(static_cast<double>(done_) / static_cast<double>(total_)) + " ";
    const double rate = elapsed > 0 ? static_cast<double>(done_) / elapsed : 0;
    if (total_ > 0) {
      std::snprintf(numbers, sizeof numbers, "%llu/%llu %s  %.0f/s",
                    static_cast<unsigned long long>(done_), static_cast<unsigned long long>(total_),
                    unit_.c_str(), rate);
    } else {
      std::snprintf(numbers, sizeof numbers, "%llu %s  %.0f/s",
                    static_cast<unsigned long long>(done_), unit_.c_str(), rate);
    }
  }
  line += numbers;
  if (!note_.empty()) line += "  " + note_;
  // \r and erase-to-end-of-line: a shorter line leaves no tail of the longer one.
  std::fprintf(stream_, "\r%s\033[K%s", line.c_str(), final ? "\n" : "");
  std::fflush(stream_);
}

}  // namespace sluice
