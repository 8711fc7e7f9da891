// FusedChains from fusion groups (see fused_chains.h).
#include "compiler/plan/fused_chains.h"

#include <algorithm>

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

}  // namespace sluice
