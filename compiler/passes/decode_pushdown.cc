// Pass `decode_pushdown`: decides, per decode node, what the decoder may be
// asked to skip, so that the runtime does not decide it itself.
//
// Rewrites: Node::pushdown of every decode-class node (decided, roi,
// dct_scaling, reason). Nothing else changes; no diagnostics.
//
// Why: a fused chain reads only the window its composed crop selects, so the
// decoder can decode just that region of interest (JPEG: fewer Huffman rows,
// less IDCT and colour conversion), and a large downscale can be served by a
// DCT-scaled decode (1/2, 1/4, 1/8). Both are only valid when one fused chain
// is the only reader of the decoded image: a second fused chain computes its
// own window, and a reference chain (a batch field on the reference
// implementations) needs the whole image. DCT scaling changes pixels beyond
// the kernels' tolerance, so it is allowed here but stays off unless the run
// asks for it (`sluice run --dct-scaling`, LoaderOptions::dct_scaling).
//
// The rule (the loader applied it per run before this pass existed): roi when
// the graph has exactly one fusion group, no reference chain, and that group
// reads this decode's output; dct_scaling when roi and the group rescales.
#include <string>
#include <vector>

#include "compiler/passes/fused_chains.h"
#include "compiler/passes/fusion_util.h"
#include "compiler/passes/pass.h"

namespace sluice {

void DecidePushdown(Graph& graph, PassContext& context) {
  (void)context;  // pushdown never rejects a spec
  const int groups = CountFusionGroups(graph);
  const bool references = !BuildReferenceChains(graph).empty();
  for (Node& node : graph.nodes) {
    if (node.op == nullptr || node.op->op_class != OpClass::kDecode || node.outputs.empty()) {
      continue;
    }
    Node::Pushdown& p = node.pushdown;
    p = Node::Pushdown{};
    p.decided = true;
    // The fusion groups that read this decode's output, and whether one rescales.
    std::vector<int> readers;
    bool rescales = false;
    for (NodeId c : graph.Consumers(node.outputs[0])) {
      const Node& reader = graph.nodes[c];
      if (reader.fusion_group < 0) continue;
      readers.push_back(reader.fusion_group);
      for (NodeId m : GroupNodes(graph, reader.fusion_group)) {
        rescales = rescales || IsRescaleOp(graph.nodes[m].op);
      }
    }
    if (references) {
      p.reason =
          "off: a batch field runs on the reference implementations, which need the whole "
          "decoded image";
    } else if (readers.empty()) {
      p.reason = "off: no fused chain reads the decoded image, so the whole image is decoded";
    } else if (groups != 1) {
      p.reason = "off: " + std::to_string(groups) +
                 " fused chains read decoded images; a region of interest serves a single chain";
    } else {
      p.roi = true;
      p.dct_scaling = rescales;
      p.reason = "the fused chain's crop window becomes the decoder's region of interest";
      if (rescales) {
        p.reason +=
            "; DCT-scaled decode (1/2, 1/4, 1/8) of large downscales is allowed but off unless "
            "the run asks for it (--dct-scaling), because it changes pixels beyond the kernels' "
            "tolerance";
      }
    }
  }
}

}  // namespace sluice
