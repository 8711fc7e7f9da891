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
  std::string name;                  // unique in the graph (image, image.1, ...)
  std::optional<TensorType> type;    // unset until type inference; unset after a type
                                     // error too, so later checks do not cascade
  NodeId producer = -1;
};

enum class Device { kCpu, kGpu };

struct Node {
  const OpDef* op = nullptr;
  ParamList params;                  // every declared parameter, defaults explicit
  std::vector<ValueId> inputs;
  std::vector<ValueId> outputs;
  SourceMark mark;                   // where the spec wrote this step
  int op_id = 0;                     // stable id keying this node's random draws
  int fusion_group = -1;             // set by fusion passes; -1 = not fused
  Device device = Device::kCpu;      // set by placement
};

struct Graph {
  std::string name;                  // the spec's `name`
  std::string spec_file;
  ParamList sampling;                // the spec's validated sections, carried through
  ParamList output;
  std::vector<Node> nodes;           // topological order
  std::vector<Value> values;

  ValueId AddValue(std::string name);
  NodeId AddNode(Node node);         // sets the producer of node.outputs
  const Value& value(ValueId id) const { return values[id]; }
  Value& value(ValueId id) { return values[id]; }
  // Nodes that read `id`.
  std::vector<NodeId> Consumers(ValueId id) const;
};

struct Spec;
class Diagnostics;

// Builds the IR from a spec the front end accepted (topologically sorted; the
// front end has rejected cycles and dangling names). Values are untyped.
Graph BuildGraph(const Spec& spec);

// Checks the structural invariants: ids in range, topological order, one
// producer per value, unique value names, input counts matching the op,
// every parameter declared by the op present; and, once typed, that types are
// set. Returns the first violation.
Status VerifyGraph(const Graph& graph);

// Stable text form, for golden tests and `--emit=ir`.
std::string PrintGraph(const Graph& graph);

}  // namespace sluice
