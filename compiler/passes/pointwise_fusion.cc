// Pass `pointwise_fusion`: extends each fusion group that geometry_composition
// formed with the pointwise-class ops that follow it (color_jitter, grayscale,
// normalize, layout, cast), so that one kernel resamples, converts and writes
// straight into the batch slot in the requested layout and dtype.
//
// From a group's last node it follows single-consumer, single-input
// pointwise-class nodes; it stops at the first node that is not pointwise
// (the batch, or a resample op after pointwise ops, which breaks the normal
// form: that op runs on its reference implementation, with a note) or whose
// output is read by more than one node. The group's output (its last node's
// output) must have a static type, since the kernel writes a fixed-size batch
// slot; a group whose output is not static is dissolved (fusion_group = -1 on
// its nodes) with a note saying which op to add.
//
// Finally each group must pass the code generator's CheckFusable
// (ops/fusion/sample_args.h: pad modes, fills, channel counts); one that does
// not is dissolved with the reason as a note.
//
// A group is then what plan/fused_chains.h turns into one FusedChain: input =
// the decode's output, output = the last node's output.
//
// Rewrites: Node::fusion_group and Graph::notes only; no diagnostics.
#include <string>
#include <vector>

#include "compiler/passes/fusion_util.h"
#include "compiler/passes/pass.h"
#include "compiler/plan/fused_chains.h"
#include "ops/fusion/sample_args.h"

namespace sluice {

void FusePointwise(Graph& graph, Diagnostics& /*diags*/) {
  const int groups = NextFusionGroup(graph);
  for (int group = 0; group < groups; ++group) {
    std::vector<NodeId> members = GroupNodes(graph, group);
    if (members.empty()) continue;
    NodeId last = members.back();
    NodeId next = SoleChainConsumer(graph, graph.nodes[last]);
    while (next >= 0 && graph.nodes[next].op->fusion == FusionRole::kPointwise &&
           graph.nodes[next].fusion_group < 0) {
      graph.nodes[next].fusion_group = group;
      last = next;
      next = SoleChainConsumer(graph, graph.nodes[next]);
    }
    if (next >= 0 && graph.nodes[next].op->fusion == FusionRole::kGeometry &&
        graph.nodes[next].fusion_group < 0) {
      graph.notes.push_back("not fused: " + DescribeNode(graph.nodes[next]) +
                            " follows the pointwise ops of fusion group " + std::to_string(group) +
                            "; a fused chain has its resample ops first; it runs on the "
                            "reference implementation");
    }

    const Node& tail = graph.nodes[last];
    const Value& out = graph.value(tail.outputs[0]);
    if (!out.type || !out.type->is_static()) {
      for (NodeId n : GroupNodes(graph, group)) graph.nodes[n].fusion_group = -1;
      graph.notes.push_back(
          "not fused: the chain ending at " + DescribeNode(tail) + " gives " +
          (out.type ? out.type->ToString() : std::string("an untyped value")) +
          ", whose size is known only at run time; a fused kernel writes a fixed-size batch "
          "slot: end the chain with a crop, center_crop or a resize to [h, w]");
      continue;
    }
    // What the code generator accepts (pad modes, fills, channel counts).
    if (Status fusable = CheckFusable(ChainForGroup(graph, group)); !fusable) {
      for (NodeId n : GroupNodes(graph, group)) graph.nodes[n].fusion_group = -1;
      std::string why = fusable.error().message;
      if (auto pos = why.find("cannot be fused: "); pos != std::string::npos) {
        why = why.substr(pos + 17);
      }
      graph.notes.push_back("not fused: the chain ending at " + DescribeNode(tail) + ": " + why +
                            "; it runs on the reference implementations");
    }
  }

  // Renumber so that group ids stay 0..n-1 after dissolving.
  int next_id = 0;
  for (int group = 0; group < groups; ++group) {
    std::vector<NodeId> members = GroupNodes(graph, group);
    if (members.empty()) continue;
    for (NodeId n : members) graph.nodes[n].fusion_group = next_id;
    ++next_id;
  }
}

}  // namespace sluice
