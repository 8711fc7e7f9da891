// FusedChains from fusion groups (see fused_chains.h).
#include "compiler/passes/fused_chains.h"

#include <algorithm>
#include <cstring>
#include <span>

#include "compiler/passes/fusion_util.h"

namespace sluice {

std::string ChainSymbol(int group) { return "sluice_chain_" + std::to_string(group); }

int CountFusionGroups(const Graph& graph) {
  int count = 0;
  for (const Node& node : graph.nodes) count = std::max(count, node.fusion_group + 1);
  return count;
}

FusedChain ChainForGroup(const Graph& graph, int group) {
  FusedChain chain;
  chain.symbol = ChainSymbol(group);
  const Node* last = nullptr;
  for (const Node& node : graph.nodes) {
    if (node.fusion_group != group) continue;
    if (last == nullptr && !node.inputs.empty()) {
      const Value& in = graph.value(node.inputs[0]);
      if (in.type) chain.input = *in.type;
    }
    if (node.device == Device::kGpu && chain.gpu_from < 0) {
      chain.gpu_from = static_cast<int>(chain.steps.size());
    }
    chain.steps.push_back(ChainStep{node.op, node.params, node.op_id});
    last = &node;
  }
  if (last != nullptr && !last->outputs.empty()) {
    const Value& out = graph.value(last->outputs[0]);
    if (out.type) chain.output = *out.type;
  }
  return chain;
}

std::vector<FusedChain> BuildFusedChains(const Graph& graph) {
  std::vector<FusedChain> chains;
  const int groups = CountFusionGroups(graph);
  for (int g = 0; g < groups; ++g) chains.push_back(ChainForGroup(graph, g));
  return chains;
}

std::vector<TensorType> ChainStepTypes(const FusedChain& chain) {
  std::vector<TensorType> types;
  TensorType current = chain.input;
  for (const ChainStep& step : chain.steps) {
    if (step.op == nullptr || !step.op->infer) return {};
    auto out = step.op->infer(std::span<const TensorType>(&current, 1), step.params);
    if (!out || out->size() != 1) return {};
    current = (*out)[0];
    types.push_back(current);
  }
  return types;
}

std::vector<int> GpuSplitPoints(const FusedChain& chain) {
  std::vector<int> splits;
  const std::vector<TensorType> types = ChainStepTypes(chain);
  const int n = static_cast<int>(chain.steps.size());
  if (static_cast<int>(types.size()) != n) return splits;
  for (int k = 1; k < n; ++k) {
    bool tail_ok = true;
    for (int i = k; i < n; ++i) {
      const OpDef* op = chain.steps[i].op;  // the GPU-eligibility predicate
      tail_ok = tail_ok && op != nullptr && op->gpu_batch;
    }
    const TensorType& staging = types[k - 1];
    if (tail_ok && staging.dtype == DType::kUInt8 && staging.layout == Layout::kHWC &&
        staging.is_static()) {
      splits.push_back(k);
    }
  }
  return splits;
}

std::string BatchFieldOf(const Graph& graph, ValueId id) {
  for (const Node& batch : graph.nodes) {
    if (batch.op == nullptr || batch.op->op_class != OpClass::kBatch) continue;
    for (size_t i = 0; i < batch.inputs.size() && i < batch.outputs.size(); ++i) {
      if (batch.inputs[i] != id) continue;
      std::string name = graph.value(batch.outputs[i]).name;
      if (name.starts_with(kBatchValuePrefix)) name = name.substr(std::strlen(kBatchValuePrefix));
      return name;
    }
    return "";
  }
  return "";
}

namespace {

// True when value `v` is the output of the last node of a fusion group.
bool WrittenByGroup(const Graph& graph, ValueId v) {
  const NodeId producer = graph.value(v).producer;
  if (producer < 0) return false;
  const int group = graph.nodes[producer].fusion_group;
  if (group < 0) return false;
  for (size_t n = static_cast<size_t>(producer) + 1; n < graph.nodes.size(); ++n) {
    if (graph.nodes[n].fusion_group == group) return false;
  }
  return true;
}

// Whether `note` names node `n` the way the fusion passes do (DescribeNode).
bool NoteNames(const std::string& note, const Node& node) {
  return note.find(DescribeNode(node)) != std::string::npos;
}

}  // namespace

std::vector<ReferenceFieldChain> BuildReferenceChains(const Graph& graph) {
  std::vector<ReferenceFieldChain> out;
  const Node* batch = nullptr;
  for (const Node& node : graph.nodes) {
    if (node.op != nullptr && node.op->op_class == OpClass::kBatch) batch = &node;
  }
  if (batch == nullptr) return out;
  for (size_t i = 0; i < batch->inputs.size() && i < batch->outputs.size(); ++i) {
    const ValueId field_value = batch->inputs[i];
    if (WrittenByGroup(graph, field_value)) continue;
    // Walk back to the decode through single-input, single-output per-sample ops.
    std::vector<NodeId> path;
    NodeId decode = -1;
    bool simple = true;
    ValueId v = field_value;
    while (true) {
      const NodeId p = graph.value(v).producer;
      if (p < 0) {
        simple = false;
        break;
      }
      const Node& node = graph.nodes[p];
      if (node.op == nullptr) {
        simple = false;
        break;
      }
      if (node.op->op_class == OpClass::kDecode) {
        decode = p;
        break;
      }
      const bool per_sample =
          node.op->op_class == OpClass::kResample || node.op->op_class == OpClass::kPointwise;
      if (!per_sample || !node.op->reference || node.inputs.size() != 1 ||
          node.outputs.size() != 1) {
        simple = false;
        break;
      }
      path.push_back(p);
      v = node.inputs[0];
    }
    if (!simple || decode < 0 || path.empty()) continue;
    std::reverse(path.begin(), path.end());

    ReferenceFieldChain ref;
    ref.field = BatchFieldOf(graph, field_value);
    ref.decode = decode;
    ref.nodes = path;
    ref.chain.symbol = "reference:" + ref.field;
    const Node& dec = graph.nodes[decode];
    if (!dec.outputs.empty() && graph.value(dec.outputs[0]).type) {
      ref.chain.input = *graph.value(dec.outputs[0]).type;
    }
    if (graph.value(field_value).type) ref.chain.output = *graph.value(field_value).type;
    for (NodeId n : path) {
      const Node& node = graph.nodes[n];
      ref.chain.steps.push_back(ChainStep{node.op, node.params, node.op_id});
    }
    // Why: the notes naming one of its nodes or its decode.
    for (const std::string& note : graph.notes) {
      bool names = NoteNames(note, dec);
      for (NodeId n : path) names = names || NoteNames(note, graph.nodes[n]);
      if (names) ref.reasons.push_back(note);
    }
    if (ref.reasons.empty()) {
      // A value on the path read by more than one op (e.g. a decoded image
      // read by two fields' chains) cannot be fused through.
      std::vector<NodeId> chain_nodes{decode};
      chain_nodes.insert(chain_nodes.end(), path.begin(), path.end() - 1);
      for (NodeId n : chain_nodes) {
        const Node& node = graph.nodes[n];
        if (node.outputs.empty()) continue;
        const size_t readers = graph.Consumers(node.outputs[0]).size();
        if (readers > 1) {
          ref.reasons.push_back("the output of " + DescribeNode(node) + " is read by " +
                                std::to_string(readers) +
                                " ops; a fused chain reads a decoded image alone and "
                                "materializes nothing in between");
          break;
        }
      }
    }
    if (ref.reasons.empty()) {
      ref.reasons.push_back("its ops (" + DescribeNode(graph.nodes[path.front()]) + " .. " +
                            DescribeNode(graph.nodes[path.back()]) +
                            ") are not in the fused normal form");
    }
    out.push_back(std::move(ref));
  }
  return out;
}

}  // namespace sluice
