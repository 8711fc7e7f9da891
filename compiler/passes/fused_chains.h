// FusedChains from the fusion groups of a graph after the fusion passes (a view
// of the IR that passes, the cost model, the plan writer and the driver share;
// it lives with the passes so that no pass reaches up into compiler/plan or
// compiler/cost), and the facts about a chain that placement needs
// (ChainStepTypes, GpuSplitPoints).
//
// A fusion group (the nodes with Node::fusion_group == g, in node order) reads
// the output of a decode and ends at a node whose output is static; its
// FusedChain (ops/fusion/fused_chain.h) has input = the type of the group's
// first input, output = the type of its last node's output, steps = the nodes'
// ops, explicit params and op ids, symbol = ChainSymbol(g), and gpu_from = the
// index of the group's first node that placement put on the GPU (-1: none;
// placement moves only a tail, so every later node is on the GPU too).
//
// Reference chains (BuildReferenceChains) describe the batch fields that no
// fusion group writes: the runtime computes them per sample on the reference
// implementations (plan.json "reference_chains", docs/plan.md).
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

// Types of every step's output in `chain` (inferred from chain.input through
// the ops' type rules); empty when inference fails.
std::vector<TensorType> ChainStepTypes(const FusedChain& chain);

// The valid GPU splits of a chain, ascending: every k with 0 < k < steps such
// that steps [k, end) are all ops whose entry has OpDef::gpu_batch
// (deterministic pointwise ops with a batch-wide GPU lowering: grayscale,
// normalize, layout, cast; the predicate codegen's CheckGpuSplit uses too) and
// step k-1 writes a static uint8 HWC image (the staging tensor that crosses
// the bus). The placement pass weighs these; the cost model prices them.
std::vector<int> GpuSplitPoints(const FusedChain& chain);

// A batch field that no fusion group writes, computed per sample by running
// the registry's reference implementations step by step (ReferenceChain in
// ops/fusion/sample_args.h): the slow path for chains not in fusion normal form.
struct ReferenceFieldChain {
  std::string field;          // the batch field (without the "batch." prefix)
  FusedChain chain;           // symbol = "reference:<field>", gpu_from = -1
  NodeId decode = -1;         // the decode node whose output the chain reads
  std::vector<NodeId> nodes;  // the nodes of chain.steps, in order
  // Why the chain is not fused: the Graph::notes that name one of its nodes
  // (or its decode), else a sentence made here (e.g. a decoded image read by
  // two ops). Never empty.
  std::vector<std::string> reasons;
};

// The fields of the graph's batch node whose value is not the output of a
// fusion group's last node and is reached from a decode's output through
// single-input, single-output resample/pointwise ops (every op on that path,
// fused in some group or not, becomes a step with its explicit params and op
// id; chain.input = the decode output's type, chain.output = the field value's
// type). A field fed by the source (a label), or whose path is not such a
// simple chain (an op with two per-sample inputs, an op without a reference
// implementation), gets none. In batch-field order. Requires a typed graph.
std::vector<ReferenceFieldChain> BuildReferenceChains(const Graph& graph);

// The batch field fed by value `id` ("" when it feeds none).
std::string BatchFieldOf(const Graph& graph, ValueId id);

}  // namespace sluice
