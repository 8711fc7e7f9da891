// Micro benchmark (issue 18 item 3): the cost of the read deadline's hand-off
// (runtime/exec/read_pool.h). A source that copies a 110 KB in-memory "file"
// (the ImageNet average) is read through a ReadPool with the deadline on (each
// read handed to an I/O thread and waited for) and off (read_timeout 0: read
// on the calling thread), by 1 or 2 reader threads with one slot each. The
// difference per read is the hand-off; compare it with a JPEG decode
// (BM_DecodeJpeg in fused_kernel_bench.cc, ~1.7 ms for 500x375). Not a test:
//   build/sluice_read_pool_bench --benchmark_repetitions=5
//       --benchmark_report_aggregates_only=true   (one command line)
#include <benchmark/benchmark.h>

#include <cstring>
#include <memory>
#include <vector>

#include "runtime/exec/read_pool.h"

namespace sluice::runtime {
namespace {

class MemorySource final : public Source {
 public:
  MemorySource() : file_(110 * 1024, 0x5a) {}
  size_t size() const override { return 1 << 20; }
  std::string SampleName(size_t i) const override { return std::to_string(i); }
  int64_t label(size_t) const override { return 0; }
  const std::vector<std::string>& class_names() const override { return classes_; }
  Result<size_t> Read(size_t, std::vector<uint8_t>& buffer) const override {
    if (buffer.size() < file_.size()) buffer.resize(file_.size());
    std::memcpy(buffer.data(), file_.data(), file_.size());
    return file_.size();
  }

 private:
  std::vector<uint8_t> file_;
  std::vector<std::string> classes_;
};

std::shared_ptr<ReadPool> g_pool;

// range(0): 1 = deadline on (pool hand-off), 0 = off (inline).
void BM_Read(benchmark::State& state) {
  if (state.thread_index() == 0) {
    g_pool = std::make_shared<ReadPool>(
        std::make_shared<MemorySource>(),
        ReadPool::Options{.timeout_s = state.range(0) ? 30.0 : 0.0, .threads = state.threads()});
  }
  ReadSlot slot;
  size_t i = 0;
  for (auto _ : state) {
    auto n = g_pool->Read(i++, slot);
    if (!n) state.SkipWithError(n.error().message.c_str());
    benchmark::DoNotOptimize(slot.buffer().data());
  }
  state.SetItemsProcessed(state.iterations());
  if (state.thread_index() == 0) g_pool.reset();
}
BENCHMARK(BM_Read)->ArgName("deadline")->Arg(0)->Arg(1)->Threads(1)->Threads(2)->UseRealTime();

}  // namespace
}  // namespace sluice::runtime

BENCHMARK_MAIN();
