// Helpers shared by the fusion passes (geometry_composition, pointwise_fusion).
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "compiler/ir/ir.h"

namespace sluice {

// A geometry op that changes the scale (its entry's GeometryFusion::rescales:
// resize, random_resized_crop).
inline bool IsRescaleOp(const OpDef* op) {
  return op != nullptr && op->fusion == FusionRole::kGeometry && op->geometry.rescales;
}

// "`resize` (line 14)" for notes.
inline std::string DescribeNode(const Node& node) {
  std::string out = "`" + (node.op ? node.op->name : std::string("?")) + "`";
  if (node.mark.valid()) out += " (line " + std::to_string(node.mark.line) + ")";
  return out;
}

// The node that is the only reader of `node`'s only output, when that reader
// takes one input and gives one output (so it can join a chain); else -1.
inline NodeId SoleChainConsumer(const Graph& graph, const Node& node) {
  if (node.outputs.size() != 1) return -1;
  std::vector<NodeId> consumers = graph.Consumers(node.outputs[0]);
  if (consumers.size() != 1) return -1;
  const Node& next = graph.nodes[consumers[0]];
  if (next.op == nullptr || next.inputs.size() != 1 || next.outputs.size() != 1) return -1;
  return consumers[0];
}

// One more than the largest fusion group id in use (0 when none).
inline int NextFusionGroup(const Graph& graph) {
  int next = 0;
  for (const Node& node : graph.nodes) next = std::max(next, node.fusion_group + 1);
  return next;
}

// The nodes of fusion group `group`, in node order.
inline std::vector<NodeId> GroupNodes(const Graph& graph, int group) {
  std::vector<NodeId> out;
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    if (graph.nodes[n].fusion_group == group) out.push_back(static_cast<NodeId>(n));
  }
  return out;
}

}  // namespace sluice
