// sluice::Loader and sluice::Batch: thin handles over runtime::LoaderCore.
#include "sluice/loader.h"

#include <charconv>
#include <sstream>
#include <string_view>

#include "runtime/exec/loader_core.h"

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
std::string LoaderState::ToString() const {
  std::string text = "sluice-state v1 epoch=" + std::to_string(epoch) +
                     " position=" + std::to_string(position) + " spec=" + spec_hash;
  for (size_t i = 0; i < delivered_ahead.size(); ++i) {
    text += (i == 0 ? " ahead=" : ",") + std::to_string(delivered_ahead[i]);
  }
  return text;
}

Result<LoaderState> LoaderState::FromString(const std::string& text) {
  std::istringstream in(text);
  std::string magic, version, e, p, s, a, rest;
  in >> magic >> version >> e >> p >> s >> a >> rest;
  auto bad = [&] {
    return MakeError(ErrorCode::kInvalidArgument, "not a loader state: `" + text + "`",
                     "expected `sluice-state v1 epoch=E position=P spec=HASH [ahead=I,J,...]`");
  };
  if (magic != "sluice-state" || version != "v1" || !e.starts_with("epoch=") ||
      !p.starts_with("position=") || !s.starts_with("spec=") ||
      !(a.empty() || a.starts_with("ahead=")) || !rest.empty()) {
    return bad();
  }
  LoaderState state;
  auto parse = [](std::string_view digits, uint64_t& out) {
    auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), out);
    return ec == std::errc() && ptr == digits.data() + digits.size() && !digits.empty();
  };
  if (!parse(e.substr(6), state.epoch) || !parse(p.substr(9), state.position)) return bad();
  state.spec_hash = s.substr(5);
  if (!a.empty()) {
    std::string_view list = std::string_view(a).substr(6);
    while (true) {
      const size_t comma = list.find(',');
      uint64_t index = 0;
      if (!parse(list.substr(0, comma), index)) return bad();
      state.delivered_ahead.push_back(index);
      if (comma == std::string_view::npos) break;
      list.remove_prefix(comma + 1);
    }
  }
  return state;
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
  auto core = runtime::LoaderCore::Create(plan, options);
  if (!core) return std::unexpected(core.error());
  return Loader(std::move(*core));
}

Result<std::optional<Batch>> Loader::Next() { return core_->Next(); }
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

Loader::Iterator Loader::begin() {
  iter_error_.reset();
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
