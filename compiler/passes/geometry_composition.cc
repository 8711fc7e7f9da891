// Pass `geometry_composition`: marks, after each decode, the run of
// resample-class ops (crop, center_crop, pad, random_flip, resize,
// random_resized_crop) that the code generator composes into one affine
// resample from the decoded image to the output grid, with no intermediate
// image in between.
//
// The run starts at the decode's output and follows single-consumer,
// single-input resample-class nodes; it ends at the first node that is not
// resample-class or whose output is read by more than one node (that output
// must be materialized). A run is fusable when it is in the normal form of
// ops/fusion/fused_chain.h: at most one op that rescales (resize or
// random_resized_crop); crops, pads and flips compose with it freely. A
// fusable run gets a fresh fusion group id on each of its nodes
// (Node::fusion_group, numbered 0, 1, ... in node order); pointwise_fusion
// extends the group afterwards.
//
// A run that is not in normal form stays unfused (its ops run on the
// reference implementations) and the reason goes to Graph::notes for
// report.txt; so does a decode followed by a pointwise op before any resample
// op. Neither is a spec error: no diagnostics.
//
// Rewrites: Node::fusion_group and Graph::notes only.
#include <string>
#include <vector>

#include "compiler/passes/fusion_util.h"
#include "compiler/passes/pass.h"

namespace sluice {

void ComposeGeometry(Graph& graph, Diagnostics& /*diags*/) {
  for (size_t d = 0; d < graph.nodes.size(); ++d) {
    const Node& decode = graph.nodes[d];
    if (decode.op == nullptr || decode.op->op_class != OpClass::kDecode) continue;

    std::vector<NodeId> run;
    NodeId next = SoleChainConsumer(graph, decode);
    while (next >= 0 && graph.nodes[next].op->fusion == FusionRole::kGeometry &&
           graph.nodes[next].fusion_group < 0) {
      run.push_back(next);
      next = SoleChainConsumer(graph, graph.nodes[next]);
    }
    if (run.empty()) {
      if (next >= 0 && graph.nodes[next].op->fusion == FusionRole::kPointwise) {
        graph.notes.push_back("not fused: " + DescribeNode(graph.nodes[next]) + " follows " +
                              DescribeNode(decode) +
                              " before any resample op; a fused chain starts with a resample "
                              "(resize, crop, ...) that gives a static size; these ops run on "
                              "the reference implementations");
      }
      continue;
    }

    std::vector<NodeId> rescales;
    for (NodeId n : run) {
      if (IsRescaleOp(graph.nodes[n].op)) rescales.push_back(n);
    }
    if (rescales.size() > 1) {
      std::string which;
      for (NodeId n : rescales) which += (which.empty() ? "" : ", ") + DescribeNode(graph.nodes[n]);
      graph.notes.push_back("not fused: the resample chain after " + DescribeNode(decode) +
                            " rescales more than once (" + which +
                            "); a fused chain allows one resize or random_resized_crop; "
                            "these ops run on the reference implementations");
      continue;
    }
    int group = NextFusionGroup(graph);
    for (NodeId n : run) graph.nodes[n].fusion_group = group;
  }
}

}  // namespace sluice
