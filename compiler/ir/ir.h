// The compiler's intermediate representation: a typed graph per sample.
//
// Nodes are op applications (an OpDef plus fully explicit parameters); values
// are the tensors flowing between them. Node 0.. are kept in a topological
// order (every node's inputs are produced by earlier nodes). The graph starts
// at one source node and ends at one batch node. Passes rewrite the graph in
// place; the verifier checks the invariants after each pass in tests and debug
// builds; the printer gives the stable text form that golden tests check.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ops/param.h"
#include "ops/registry.h"
#include "ops/types.h"
#include "sluice/result.h"

namespace sluice {

using ValueId = int;
using NodeId = int;

struct Value {
  std::string name;                // unique in the graph (image, image.1, ...)
  std::optional<TensorType> type;  // unset until type inference; unset after a type
                                   // error too, so later checks do not cascade
  NodeId producer = -1;
};

enum class Device { kCpu, kGpu };

struct Node {
  const OpDef* op = nullptr;
  ParamList params;  // every declared parameter, defaults explicit
  std::vector<ValueId> inputs;
  std::vector<ValueId> outputs;
  SourceMark mark;               // where the spec wrote this step
  int op_id = 0;                 // stable id keying this node's random draws
  int fusion_group = -1;         // set by fusion passes; -1 = not fused
  Device device = Device::kCpu;  // set by placement
  // Decode nodes only, set by decode_pushdown: what the decoder may be asked
  // to skip (docs/plan.md "decode").
  struct Pushdown {
    bool decided = false;  // false before the pass (and on non-decode nodes)
    bool roi = false;  // the fused chain's crop window may become the decoder's region of interest
    bool dct_scaling =
        false;           // DCT-scaled decode may be used when the run opts in (off by default)
    std::string reason;  // why, one sentence
  } pushdown;
};

// One batch field's block in a batch buffer (set by memory_planning). A batch
// buffer holds, per field in name order, a [B, sample_shape...] block starting
// at `offset` (64-byte aligned).
struct FieldMemory {
  std::string field;
  DType dtype = DType::kUInt8;
  std::vector<int64_t> sample_shape;  // static
  int64_t bytes_per_sample = 0;
  int64_t offset = 0;  // of the [B,...] block, when every field is written on the host
  // A field whose chain's tail runs on the GPU: the host writes the staging
  // image (uint8 HWC) instead; 0 when the field has no GPU tail.
  int64_t staging_bytes_per_sample = 0;
  int64_t staged_offset = 0;  // of the block when GPU tails are used
};

// The batch buffer layout (set by memory_planning; pool counts stay run-time
// knobs). `planned` is false before the pass.
struct MemoryPlan {
  bool planned = false;
  int64_t batch_size = 0;
  std::vector<FieldMemory> fields;  // in field-name order
  int64_t batch_bytes = 0;          // one host batch buffer, every field on the host
  int64_t staged_batch_bytes = 0;   // one host batch buffer when the GPU tails are used
};

// One placement the placement pass weighed (compiler/passes/placement.cc), with
// the cost model's prediction for it (compiler/cost/cost_model.h).
struct PlacementAlternative {
  std::string name;           // "all on cpu", "group 0: normalize.. on gpu", ...
  std::vector<int> gpu_from;  // per fusion group: FusedChain::gpu_from (-1 = all CPU)
  bool predicted = false;     // false without a profile: the numbers below are 0
  double images_per_second = 0;
  double cpu_s_per_sample = 0;  // CPU seconds per sample (one core)
  double gpu_s_per_sample = 0;
  double h2d_bytes_per_sample = 0;
  std::string limit;  // what bounds images_per_second: "cpu", "gpu" or "bus"
};

// What the placement pass decided. `ran` is false before it runs.
struct PlacementDecision {
  bool ran = false;
  std::string requested;        // output.device as written: auto, cpu, cuda, cuda:N
  std::string device = "cpu";   // "cpu" (no group split) or "cuda:N"
  std::string reason;           // one or two sentences for plan.json and report.txt
  int cpu_budget = 0;           // cores the prediction assumes (0 without a profile)
  std::string cpu_budget_from;  // "output.cpu_budget", "--cpu-budget", "profile cores"
  std::vector<PlacementAlternative> alternatives;  // in the order considered
  int chosen = -1;              // index into alternatives, -1 when none was listed
};

struct Graph {
  std::string name;  // the spec's `name`
  std::string spec_file;
  ParamList sampling;  // the spec's validated sections, carried through
  ParamList output;
  std::vector<Node> nodes;  // topological order
  std::vector<Value> values;
  // Set by type inference once every value has a type; from then on the
  // verifier requires every value (including ones later passes add) to be typed.
  bool typed = false;
  // What passes decided and why, in the order they said it (for example why a
  // chain stays unfused). report.txt lists them; the printer shows them as
  // trailing `note:` lines.
  std::vector<std::string> notes;

  // Set by the placement pass.
  PlacementDecision placement;
  // Set by the memory_planning pass.
  MemoryPlan memory;

  ValueId AddValue(std::string name);
  // The value called `name`, or -1.
  ValueId FindValue(const std::string& name) const;
  NodeId AddNode(Node node);  // sets the producer of node.outputs
  const Value& value(ValueId id) const { return values[id]; }
  Value& value(ValueId id) { return values[id]; }
  // Nodes that read `id`.
  std::vector<NodeId> Consumers(ValueId id) const;
};

struct Spec;
class Diagnostics;

// Builds the IR from a spec the front end accepted (topologically sorted; the
// front end has rejected cycles and dangling names). Values are untyped.
//
// Node 0 is the source (its outputs are the source's tensors, e.g. jpg, cls);
// nodes 1..n are the graph steps in spec order; the last node is the batch,
// whose inputs are the field tensors and whose outputs are named
// `batch.<field>` (the prefix keeps them apart from per-sample tensors of the
// same name). op_id = the node's index at build time; later passes keep it.
Graph BuildGraph(const Spec& spec);

// Prefix of the batch node's output value names ("batch." + field name).
inline constexpr const char* kBatchValuePrefix = "batch.";

// Checks the structural invariants: ids in range, topological order, one
// producer per value, unique value names, input counts matching the op,
// every parameter declared by the op present; and, once typed, that types are
// set. Returns the first violation.
Status VerifyGraph(const Graph& graph);

// Stable text form, for golden tests and `--emit=ir`:
//
//   sluice.ir "NAME"  (spec: FILE)
//   sampling: order="shuffle", remainder="drop", seed=0, sharding="auto"
//   %jpg: bytes[?], %cls: int64[] = image_folder(path="${DATA}/train")
//   %image: uint8[?,?,3] HWC = decode_jpeg(%jpg, color="rgb")
//   ...
//   %batch.image: float16[256,3,224,224] CHW, %batch.label: int64[256] = batch(%image.5, %cls, ...)
//   output: cpu_budget=auto, device="auto", ...
//
// One line per node, in node order: outputs with their types (`?type` before
// type inference), `=`, the op, its inputs, then every parameter in name order
// (ParamValue::ToString, with kAutoInt -1 shown as `auto`). A trailing
// `  [...]` lists what later passes set, only when set: op_id when it differs
// from the node index, fusion=N, device=gpu, and on a decode node once
// decode_pushdown ran roi=yes|no and dct_scaling=opt-in|no. After the output
// line, only when placement split a group onto the GPU,
// `placement: device="cuda:N"`; one `pushdown: %VALUE: REASON` line per decided
// decode node; once memory_planning ran, one `memory: FIELD ...` line per batch
// field and a `memory: batch buffer ...` line; then one `note: TEXT` line per
// entry of Graph::notes.
std::string PrintGraph(const Graph& graph);
// One parameter value as the printer shows it (`def` may be null).
std::string FormatParam(const ParamDef* def, const ParamValue& value);

}  // namespace sluice
