// FusedChains from the fusion groups of a graph after the fusion passes.
//
// A fusion group (the nodes with Node::fusion_group == g, in node order) reads
// the output of a decode and ends at a node whose output is static; its
// FusedChain (ops/fusion/fused_chain.h) has input = the type of the group's
// first input, output = the type of its last node's output, steps = the nodes'
// ops, explicit params and op ids, symbol = ChainSymbol(g), and gpu_from = the
// index of the group's first node that placement put on the GPU (-1: none;
// placement moves only a tail, so every later node is on the GPU too).
#pragma once

#include <string>
#include <vector>

#include "compiler/ir/ir.h"
#include "ops/fusion/fused_chain.h"

namespace sluice {

// "sluice_chain_<group>": the CPU kernel's symbol in kernels.so.
std::string ChainSymbol(int group);
// Number of fusion groups (largest id + 1; ids are dense after pointwise_fusion).
int CountFusionGroups(const Graph& graph);
// The chain of group `group`. Requires a typed graph and a non-empty group.
FusedChain ChainForGroup(const Graph& graph, int group);
// One chain per group, in group order.
std::vector<FusedChain> BuildFusedChains(const Graph& graph);

}  // namespace sluice
