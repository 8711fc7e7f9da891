// sluice::Loader and sluice::Batch: thin handles over runtime::LoaderCore.
#include "sluice/loader.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <limits>
#include <sstream>
#include <string_view>

#include "runtime/exec/loader_core.h"
#include "runtime/sampling/epoch_sampler.h"
#include "runtime/sampling/segment.h"

namespace sluice {

// ---- Batch ----
Batch::Batch(Batch&& other) noexcept { *this = std::move(other); }

Batch& Batch::operator=(Batch&& other) noexcept {
  if (this != &other) {
    Release();
    core_ = std::move(other.core_);
    buffer_ = other.buffer_;
    fields_ = std::move(other.fields_);
    samples_ = std::move(other.samples_);
    size_ = other.size_;
    epoch_ = other.epoch_;
    index_ = other.index_;
    cuda_event_ = other.cuda_event_;
    other.cuda_event_ = nullptr;
    other.core_.reset();
    other.buffer_ = -1;
  }
  return *this;
}

Batch::~Batch() { Release(); }

void Batch::Release() {
  if (core_ && buffer_ >= 0) core_->Release(buffer_);
  core_.reset();
  buffer_ = -1;
  fields_.clear();
  cuda_event_ = nullptr;
}

const TensorView* Batch::field(const std::string& name) const {
  for (const TensorView& v : fields_) {
    if (v.name == name) return &v;
  }
  return nullptr;
}

// ---- LoaderState ----
namespace {

std::string JoinList(const std::vector<uint64_t>& v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + std::to_string(v[i]);
  return out;
}

bool ParseU64(std::string_view digits, uint64_t& out) {
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), out);
  return ec == std::errc() && ptr == digits.data() + digits.size() && !digits.empty();
}

bool ParseInt(std::string_view digits, int& out) {
  uint64_t v = 0;
  if (!ParseU64(digits, v) || v > static_cast<uint64_t>(std::numeric_limits<int>::max())) {
    return false;
  }
  out = static_cast<int>(v);
  return true;
}

// "I,J,K" -> values; false for an empty or malformed list.
bool ParseList(std::string_view list, std::vector<uint64_t>& out) {
  while (true) {
    const size_t comma = list.find(',');
    uint64_t v = 0;
    if (!ParseU64(list.substr(0, comma), v)) return false;
    out.push_back(v);
    if (comma == std::string_view::npos) return true;
    list.remove_prefix(comma + 1);
  }
}

}  // namespace

uint64_t LoaderState::consumed_count() const {
  uint64_t count = position;
  for (const PositionRange& r : consumed) count += r.end - r.begin;
  return count;
}

std::string LoaderState::ToString() const {
  std::string text = "sluice-state v2 epoch=" + std::to_string(epoch) +
                     " position=" + std::to_string(position) + " spec=" + spec_hash +
                     " samples=" + std::to_string(samples) + " batch=" + std::to_string(batch_size);
  for (size_t i = 0; i < consumed.size(); ++i) {
    text += (i == 0 ? " consumed=" : ",") + std::to_string(consumed[i].begin) + "-" +
            std::to_string(consumed[i].end);
  }
  if (order_world_size > 0) text += " order_world=" + std::to_string(order_world_size);
  if (world_size > 0) {
    text += " rank=" + std::to_string(rank) + "/" + std::to_string(world_size) +
            " rank_position=" + std::to_string(rank_position);
    if (!rank_ahead.empty()) text += " rank_ahead=" + JoinList(rank_ahead);
  }
  return text;
}

Result<LoaderState> LoaderState::FromString(const std::string& text) {
  std::istringstream in(text);
  std::string magic, version;
  in >> magic >> version;
  auto bad = [&] {
    return MakeError(ErrorCode::kInvalidArgument, "not a loader state: `" + text + "`",
                     "expected `sluice-state v2 epoch=E position=P spec=HASH samples=N batch=B "
                     "[consumed=B-E,...] [order_world=W] [rank=R/M rank_position=Q "
                     "[rank_ahead=I,...]]`");
  };
  if (magic != "sluice-state") return bad();
  if (version == "v1") {
    return MakeError(ErrorCode::kVersionMismatch,
                     "loader state `" + text + "` is version 1 (rank-local positions)",
                     "this release reads version 2 states; restart the epoch with set_epoch");
  }
  if (version != "v2") return bad();
  LoaderState state;
  bool has_epoch = false, has_position = false, has_spec = false, has_samples = false,
       has_batch = false;
  std::string token;
  while (in >> token) {
    const size_t eq = token.find('=');
    if (eq == std::string::npos) return bad();
    const std::string_view key = std::string_view(token).substr(0, eq);
    const std::string_view value = std::string_view(token).substr(eq + 1);
    bool ok = true;
    if (key == "epoch") {
      ok = ParseU64(value, state.epoch) && !has_epoch;
      has_epoch = true;
    } else if (key == "position") {
      ok = ParseU64(value, state.position) && !has_position;
      has_position = true;
    } else if (key == "spec") {
      state.spec_hash = std::string(value);
      ok = !has_spec;
      has_spec = true;
    } else if (key == "samples") {
      ok = ParseU64(value, state.samples) && !has_samples;
      has_samples = true;
    } else if (key == "batch") {
      ok = ParseU64(value, state.batch_size) && !has_batch;
      has_batch = true;
    } else if (key == "consumed") {
      std::string_view list = value;
      while (ok) {
        const size_t comma = list.find(',');
        const std::string_view item = list.substr(0, comma);
        const size_t dash = item.find('-');
        PositionRange r;
        ok = dash != std::string_view::npos && ParseU64(item.substr(0, dash), r.begin) &&
             ParseU64(item.substr(dash + 1), r.end);
        state.consumed.push_back(r);
        if (comma == std::string_view::npos) break;
        list.remove_prefix(comma + 1);
      }
    } else if (key == "order_world") {
      ok = ParseInt(value, state.order_world_size);
    } else if (key == "rank") {
      const size_t slash = value.find('/');
      ok = slash != std::string_view::npos && ParseInt(value.substr(0, slash), state.rank) &&
           ParseInt(value.substr(slash + 1), state.world_size) && state.world_size > 0 &&
           state.rank < state.world_size;
    } else if (key == "rank_position") {
      ok = ParseU64(value, state.rank_position);
    } else if (key == "rank_ahead") {
      ok = ParseList(value, state.rank_ahead);
    } else {
      ok = false;
    }
    if (!ok) return bad();
  }
  if (!has_epoch || !has_position || !has_spec || !has_samples || !has_batch) return bad();
  return state;
}

Result<LoaderState> MergeStates(const std::vector<LoaderState>& states) {
  auto fail = [](size_t i, const std::string& why) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "cannot merge loader states: state " + std::to_string(i) + " " + why,
                     "pass the State() of every rank of one job, taken at the same step");
  };
  if (states.empty()) return fail(0, "is missing (no states given)");
  const LoaderState& first = states[0];
  for (size_t i = 1; i < states.size(); ++i) {
    const LoaderState& s = states[i];
    if (s.spec_hash != first.spec_hash || s.samples != first.samples ||
        s.batch_size != first.batch_size) {
      return fail(i, "is for another spec, sample count or batch size than state 0");
    }
    if (s.epoch != first.epoch) {
      return fail(i, "is in epoch " + std::to_string(s.epoch) + ", state 0 in epoch " +
                         std::to_string(first.epoch) + " (ranks not in lockstep)");
    }
    if (s.complete() != first.complete()) return fail(i, "mixes complete and rank states");
  }
  if (first.complete()) {
    for (size_t i = 1; i < states.size(); ++i) {
      if (!(states[i] == first)) {
        return fail(i,
                    "differs from state 0: strict-ordering states are the same on every "
                    "rank only when the ranks delivered the same number of batches");
      }
    }
    return first;
  }
  const int world = first.world_size;
  if (world < 1) return fail(0, "has world size " + std::to_string(world) + " (must be >= 1)");
  std::vector<bool> seen(static_cast<size_t>(world), false);
  for (size_t i = 0; i < states.size(); ++i) {
    const LoaderState& s = states[i];
    if (s.world_size != world || s.position != first.position || s.consumed != first.consumed ||
        s.order_world_size != first.order_world_size) {
      return fail(i, "is from another segment (world size or consumed set) than state 0");
    }
    if (s.rank < 0 || s.rank >= world) {
      return fail(i, "names rank " + std::to_string(s.rank) + ", not one of the " +
                         std::to_string(world) + " ranks");
    }
    if (seen[static_cast<size_t>(s.rank)]) return fail(i, "repeats rank " + std::to_string(s.rank));
    seen[static_cast<size_t>(s.rank)] = true;
  }
  if (states.size() != static_cast<size_t>(world)) {
    return fail(states.size(), "is missing: " + std::to_string(states.size()) + " states for " +
                                   std::to_string(world) + " ranks");
  }
  std::vector<runtime::PosRange> ranges;
  for (const PositionRange& r : first.consumed) ranges.push_back({r.begin, r.end});
  const runtime::ConsumedSet base(first.position, std::move(ranges), first.order_world_size);
  runtime::SegmentLayout layout;
  layout.real = first.samples - std::min(first.samples, base.count());
  layout.batch = std::max<uint64_t>(first.batch_size, 1);
  layout.world = world;
  layout.contiguous = first.order_world_size > 0;
  runtime::ConsumedSet all = base;
  for (const LoaderState& s : states) {
    runtime::AddRankBatches(all, base, layout, s.rank, s.rank_position / layout.batch,
                            s.rank_ahead);
  }
  LoaderState out;
  out.epoch = first.epoch;
  out.spec_hash = first.spec_hash;
  out.samples = first.samples;
  out.batch_size = first.batch_size;
  out.position = all.prefix();
  for (const runtime::PosRange& r : all.ranges()) out.consumed.push_back({r.begin, r.end});
  out.order_world_size = all.empty() ? 0 : first.order_world_size;
  return out;
}

Result<int> LocalRankFromEnvironment() {
  return runtime::ParseLocalRank(std::getenv("LOCAL_RANK"));
}

// ---- Loader ----
Loader::Loader(std::shared_ptr<runtime::LoaderCore> core) : core_(std::move(core)) {}
Loader::Loader(Loader&&) noexcept = default;
Loader& Loader::operator=(Loader&& other) noexcept {
  if (this != &other) {
    if (core_) core_->Shutdown();
    core_ = std::move(other.core_);
    iter_error_ = std::move(other.iter_error_);
  }
  return *this;
}
Loader::~Loader() {
  if (core_) core_->Shutdown();
}

Result<Loader> Loader::Create(const Plan& plan, const LoaderOptions& options) {
  if (runtime::ForkedAfterThreadsStarted()) return std::unexpected(runtime::ForkedError());
  auto core = runtime::LoaderCore::Create(plan, options);
  if (!core) return std::unexpected(core.error());
  return Loader(std::move(*core));
}

Result<std::optional<Batch>> Loader::Next() { return core_->Next(); }
Result<std::optional<Batch>> Loader::NextWithin(std::chrono::milliseconds wait, bool* timed_out) {
  return core_->Next(std::chrono::steady_clock::now() + wait, timed_out);
}
LoaderState Loader::State() const { return core_->State(); }
Status Loader::Restore(const LoaderState& state) { return core_->Restore(state); }
LoaderStats Loader::Stats() const { return core_->Stats(); }
Result<std::vector<BadSample>> Loader::BadSamples(uint64_t epoch) const {
  return core_->BadSamples(epoch);
}
uint64_t Loader::batches_per_epoch() const { return core_->batches_per_epoch(); }
int64_t Loader::batch_size() const { return core_->batch_size(); }
size_t Loader::dataset_size() const { return core_->dataset_size(); }
Status Loader::StartTrace(const std::string& path, size_t max_events_per_thread) {
  return core_->StartTrace(path, max_events_per_thread);
}
Result<uint64_t> Loader::StopTrace() { return core_->StopTrace(); }
std::vector<double> Loader::BatchLatencies() const { return core_->BatchLatencies(); }

bool Loader::epoch_end_pending() const { return core_->EpochEndPending(); }

Loader::Iterator Loader::begin() {
  iter_error_.reset();
  if (epoch_end_pending()) {
    auto end = Next();  // the end of an epoch whose batches all went out
    if (!end) {
      iter_error_ = end.error();
      return Iterator(nullptr);
    }
  }
  Iterator it(this);
  it.Advance();
  return it;
}
Loader::Iterator Loader::end() { return Iterator(nullptr); }

void Loader::Iterator::Advance() {
  current_.reset();  // release the previous batch first
  if (loader_ == nullptr) return;
  auto next = loader_->Next();
  if (!next) {
    loader_->iter_error_ = next.error();
    return;
  }
  if (*next) current_.emplace(std::move(**next));
}

}  // namespace sluice
