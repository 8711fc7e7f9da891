// The IR verifier: structural invariants every pass must preserve.
//
// Checked, in this order, reporting the first violation as a kInternal error
// whose message names the node or value at fault:
//   - every node has an op; value and node ids are in range;
//   - topological order: every input of node n is produced by a node < n;
//   - each value is produced by exactly one node, and Value::producer agrees;
//   - value names are unique and non-empty; op_ids are unique;
//   - input and output counts match the op (variadic ops: the batch takes one
//     input per field and gives one output per input, at least one);
//   - every parameter the op declares as required or with a default is
//     present, and no undeclared parameter is;
//   - the graph starts with one source-class node and ends with the one
//     batch-class node;
//   - once Graph::typed is set, every value has a type.
#include <map>
#include <set>
#include <string>

#include "compiler/ir/ir.h"

namespace sluice {
namespace {

std::string NodeName(const Graph& graph, NodeId n) {
  const Node& node = graph.nodes[n];
  return "node " + std::to_string(n) + " (" + (node.op ? node.op->name : std::string("<null>")) +
         ")";
}

Status Fail(std::string message) { return MakeError(ErrorCode::kInternal, "IR: " + message); }

}  // namespace

Status VerifyGraph(const Graph& graph) {
  const int num_values = static_cast<int>(graph.values.size());
  const int num_nodes = static_cast<int>(graph.nodes.size());
  std::vector<NodeId> producer_seen(num_values, -1);
  std::set<int> op_ids;

  for (NodeId n = 0; n < num_nodes; ++n) {
    const Node& node = graph.nodes[n];
    if (node.op == nullptr) return Fail(NodeName(graph, n) + " has no op");
    for (ValueId in : node.inputs) {
      if (in < 0 || in >= num_values) {
        return Fail(NodeName(graph, n) + " reads value id " + std::to_string(in) +
                    ", out of range [0, " + std::to_string(num_values) + ")");
      }
      NodeId p = graph.values[in].producer;
      if (p < 0 || p >= n || producer_seen[in] < 0) {
        return Fail(NodeName(graph, n) + " reads %" + graph.values[in].name +
                    " before it is produced (nodes must be in topological order)");
      }
    }
    for (ValueId out : node.outputs) {
      if (out < 0 || out >= num_values) {
        return Fail(NodeName(graph, n) + " writes value id " + std::to_string(out) +
                    ", out of range [0, " + std::to_string(num_values) + ")");
      }
      if (producer_seen[out] >= 0) {
        return Fail("%" + graph.values[out].name + " is produced by both " +
                    NodeName(graph, producer_seen[out]) + " and " + NodeName(graph, n));
      }
      producer_seen[out] = n;
      if (graph.values[out].producer != n) {
        return Fail("%" + graph.values[out].name + " records producer " +
                    std::to_string(graph.values[out].producer) + " but is written by " +
                    NodeName(graph, n));
      }
    }
    if (!op_ids.insert(node.op_id).second) {
      return Fail(NodeName(graph, n) + " repeats op_id " + std::to_string(node.op_id));
    }

    const OpDef& op = *node.op;
    if (op.num_inputs >= 0) {
      if (static_cast<int>(node.inputs.size()) != op.num_inputs) {
        return Fail(NodeName(graph, n) + " has " + std::to_string(node.inputs.size()) +
                    " inputs; the op takes " + std::to_string(op.num_inputs));
      }
      if (node.outputs.size() != op.output_names.size()) {
        return Fail(NodeName(graph, n) + " has " + std::to_string(node.outputs.size()) +
                    " outputs; the op gives " + std::to_string(op.output_names.size()));
      }
    } else if (node.inputs.empty() || node.outputs.size() != node.inputs.size()) {
      return Fail(NodeName(graph, n) + " (variadic) needs one output per input and at least one;" +
                  " has " + std::to_string(node.inputs.size()) + " inputs, " +
                  std::to_string(node.outputs.size()) + " outputs");
    }

    std::set<std::string> declared;
    for (const ParamDef& def : op.params) {
      declared.insert(def.name);
      if ((def.required || def.default_value) && !node.params.contains(def.name)) {
        return Fail(NodeName(graph, n) + " lacks parameter `" + def.name + "`");
      }
    }
    for (const auto& [name, value] : node.params) {
      if (!declared.contains(name)) {
        return Fail(NodeName(graph, n) + " has undeclared parameter `" + name + "`");
      }
    }
  }

  std::map<std::string, ValueId> names;
  for (ValueId v = 0; v < num_values; ++v) {
    const Value& value = graph.values[v];
    if (value.name.empty()) return Fail("value " + std::to_string(v) + " has no name");
    if (auto [it, inserted] = names.emplace(value.name, v); !inserted) {
      return Fail("value name %" + value.name + " is used twice (values " +
                  std::to_string(it->second) + " and " + std::to_string(v) + ")");
    }
    if (producer_seen[v] < 0) return Fail("%" + value.name + " has no producer");
    if (graph.typed && !value.type) {
      return Fail("%" + value.name + " has no type after type inference");
    }
  }

  if (num_nodes == 0) return Fail("the graph has no nodes");
  if (graph.nodes.front().op->op_class != OpClass::kSource) {
    return Fail("node 0 must be the source; it is " + NodeName(graph, 0));
  }
  if (graph.nodes.back().op->op_class != OpClass::kBatch) {
    return Fail("the last node must be the batch; it is " + NodeName(graph, num_nodes - 1));
  }
  for (NodeId n = 1; n + 1 < num_nodes; ++n) {
    OpClass c = graph.nodes[n].op->op_class;
    if (c == OpClass::kSource || c == OpClass::kBatch) {
      return Fail(NodeName(graph, n) + " is a " + std::string(OpClassName(c)) +
                  " op in the middle of the graph");
    }
  }
  return Ok();
}

}  // namespace sluice
