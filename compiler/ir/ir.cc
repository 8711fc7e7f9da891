// Graph construction: Graph's methods and BuildGraph (spec -> IR).
#include "compiler/ir/ir.h"

#include <utility>

#include "compiler/spec/spec.h"

namespace sluice {

ValueId Graph::AddValue(std::string value_name) {
  values.push_back(Value{std::move(value_name), std::nullopt, -1});
  return static_cast<ValueId>(values.size()) - 1;
}

NodeId Graph::AddNode(Node node) {
  NodeId id = static_cast<NodeId>(nodes.size());
  for (ValueId out : node.outputs) {
    if (out >= 0 && out < static_cast<ValueId>(values.size())) values[out].producer = id;
  }
  nodes.push_back(std::move(node));
  return id;
}

ValueId Graph::FindValue(const std::string& value_name) const {
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i].name == value_name) return static_cast<ValueId>(i);
  }
  return -1;
}

std::vector<NodeId> Graph::Consumers(ValueId id) const {
  std::vector<NodeId> out;
  for (size_t n = 0; n < nodes.size(); ++n) {
    for (ValueId in : nodes[n].inputs) {
      if (in == id) {
        out.push_back(static_cast<NodeId>(n));
        break;
      }
    }
  }
  return out;
}

namespace {

// Adds one spec step as a node. Inputs are resolved by name among the values
// made so far; a name that is not found (which the front end should have
// rejected) becomes a value without producer so that the verifier reports it.
void AddStep(Graph& graph, const SpecStep& step, const std::vector<std::string>& output_names) {
  Node node;
  node.op = step.op;
  node.params = step.params;
  node.mark = step.mark;
  node.op_id = static_cast<int>(graph.nodes.size());
  for (const std::string& name : step.inputs) {
    ValueId id = graph.FindValue(name);
    if (id < 0) id = graph.AddValue(name);
    node.inputs.push_back(id);
  }
  for (const std::string& name : output_names) node.outputs.push_back(graph.AddValue(name));
  graph.AddNode(std::move(node));
}

}  // namespace

Graph BuildGraph(const Spec& spec) {
  Graph graph;
  graph.name = spec.name;
  graph.spec_file = spec.file;
  graph.sampling = spec.sampling;
  graph.output = spec.output;

  if (spec.source.op != nullptr) {
    std::vector<std::string> outs = spec.source.outputs;
    if (outs.empty()) outs = spec.source.op->output_names;
    AddStep(graph, spec.source, outs);
  }
  for (const SpecStep& step : spec.graph) {
    if (step.op == nullptr) continue;  // unknown op; the front end reported it
    AddStep(graph, step, step.outputs);
  }
  if (spec.batch.op != nullptr) {
    std::vector<std::string> fields = spec.batch.outputs;
    if (fields.empty()) {
      if (const ParamValue* f = FindParam(spec.batch.params, "fields");
          f != nullptr && std::holds_alternative<std::map<std::string, std::string>>(f->value)) {
        for (const auto& [field, tensor] : f->AsStringMap()) fields.push_back(field);
      }
    }
    std::vector<std::string> outs;
    for (const std::string& field : fields) outs.push_back(kBatchValuePrefix + field);
    AddStep(graph, spec.batch, outs);
  }
  return graph;
}

}  // namespace sluice
