// `sluice inspect PLAN`: plan.json for people (cli/inspect_command.cc parses
// the arguments). Reads only plan.json (and hashes kernels.so through
// Plan::Verify): no variables need binding and no kernels are loaded.
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "cli/inspect.h"
#include "ops/fusion/plan_format.h"
#include "plan/plan_document.h"
#include "sluice/plan.h"

namespace sluice::cli {
namespace {

using nlohmann::json;

// "uint8[-1,-1,3] HWC" from a plan.json type object.
std::string TypeText(const json& type) {
  if (!type.is_object()) return "?";
  std::string out = type.value("dtype", "?") + "[";
  if (type.contains("dims") && type["dims"].is_array()) {
    bool first = true;
    for (const json& d : type["dims"]) {
      if (!first) out += ",";
      first = false;
      out += d.dump();
    }
  }
  out += "]";
  const std::string layout = type.value("layout", "");
  if (!layout.empty()) out += " " + layout;
  return out;
}

std::string TypeText(const TensorType& type) { return TypeText(plan_format::TypeToJson(type)); }

// Every ${NAME} in the document's strings, with the first place it appears.
void FindVariables(const json& j, const std::string& where,
                   std::map<std::string, std::string>& found) {
  if (j.is_string()) {
    const std::string& s = j.get_ref<const std::string&>();
    for (size_t pos = s.find("${"); pos != std::string::npos; pos = s.find("${", pos + 2)) {
      const size_t end = s.find('}', pos);
      if (end == std::string::npos) break;
      found.emplace(s.substr(pos + 2, end - pos - 2), where);
    }
  } else if (j.is_object()) {
    for (const auto& [key, value] : j.items()) {
      FindVariables(value, where.empty() ? key : where + "." + key, found);
    }
  } else if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i) {
      FindVariables(j[i], where + "[" + std::to_string(i) + "]", found);
    }
  }
}

std::string StepsText(const std::vector<PlanStepDoc>& steps, int gpu_from) {
  std::string out;
  for (size_t i = 0; i < steps.size(); ++i) {
    if (i > 0) out += " -> ";
    if (static_cast<int>(i) == gpu_from) out += "[gpu] ";
    out += steps[i].op;
  }
  return out;
}

void PrintGraph(const PlanDocument& doc) {
  std::printf("graph after passes:\n");
  const json& nodes = doc.graph.contains("nodes") ? doc.graph["nodes"] : json::array();
  for (const json& n : nodes) {
    std::string outputs;
    for (const json& o : n.value("outputs", json::array())) {
      outputs += (outputs.empty() ? "" : ", ") + o.value("name", "?") + ": " +
                 TypeText(o.value("type", json()));
    }
    std::string where = n.value("device", "");
    if (n.contains("group") && n["group"].is_number() && n["group"].get<int>() >= 0) {
      where += ", group " + std::to_string(n["group"].get<int>());
    }
    if (n.contains("line") && n["line"].is_number() && n["line"].get<int>() > 0) {
      where += ", line " + std::to_string(n["line"].get<int>());
    }
    std::printf("  #%-3d %-22s %-30s -> %s\n", n.value("id", -1), n.value("op", "?").c_str(),
                ("(" + where + ")").c_str(), outputs.c_str());
  }
  if (doc.graph.contains("notes")) {
    for (const json& note : doc.graph["notes"]) std::printf("  note: %s\n", note.dump().c_str());
  }
}

void PrintGroups(const PlanDocument& doc) {
  std::printf("fusion groups: %zu\n", doc.fusion_groups.size());
  for (const PlanGroupDoc& g : doc.fusion_groups) {
    std::printf("  group %d -> batch field `%s` (%s): %s\n", g.id, g.batch_field.c_str(),
                g.symbol.c_str(), StepsText(g.steps, g.gpu_from).c_str());
    std::printf("    %s -> %s%s\n", TypeText(g.input_type).c_str(), TypeText(g.output_type).c_str(),
                g.gpu_from >= 0 ? (", GPU from step " + std::to_string(g.gpu_from) +
                                   (g.staging_type ? ", staging " + TypeText(*g.staging_type) : ""))
                                      .c_str()
                                : "");
  }
  for (const PlanReferenceDoc& r : doc.reference_chains) {
    std::printf("  reference chain -> batch field `%s`: %s\n    %s\n", r.batch_field.c_str(),
                StepsText(r.steps, -1).c_str(), r.reason.c_str());
  }
}

void PrintPlacement(const PlanDocument& doc) {
  const json& p = doc.placement;
  std::printf("placement: %s (requested %s)\n", doc.placement_device.c_str(),
              p.value("requested", json("?")).dump().c_str());
  if (p.contains("reason")) std::printf("  reason: %s\n", p["reason"].get<std::string>().c_str());
  if (p.contains("predicted") && p["predicted"].is_object()) {
    const json& pr = p["predicted"];
    std::printf("  predicted: %.1f images/s, %s-bound, %s cores (%s), profile %s\n",
                pr.value("images_per_second", 0.0), pr.value("limit", "?").c_str(),
                p.value("cpu_budget", json()).dump().c_str(),
                p.value("cpu_budget_from", json("?")).dump().c_str(),
                p.value("profile", json()).dump().c_str());
  } else {
    std::printf("  predicted: none (compile with --profile HW.yaml for a cost-model prediction)\n");
  }
  if (p.contains("alternatives") && !p["alternatives"].empty()) {
    std::printf("  alternatives considered (* = chosen):\n");
    for (const json& a : p["alternatives"]) {
      std::printf("    %s %-60s %10.1f images/s  %s-bound\n", a.value("chosen", false) ? "*" : " ",
                  a.value("name", "?").c_str(), a.value("images_per_second", 0.0),
                  a.value("limit", "?").c_str());
    }
  }
}

void PrintRest(const PlanDocument& doc) {
  if (doc.decode) {
    std::printf("decode: %s %s; region of interest %s, DCT scaling %s\n  %s\n",
                doc.decode->op.c_str(), doc.decode->params.dump().c_str(),
                doc.decode->roi ? "yes" : "no", doc.decode->dct_scaling ? "yes" : "no",
                doc.decode->reason.c_str());
  }
  if (doc.memory) {
    std::printf("memory: batch %lld, %lld bytes (%.1f MB) per host batch buffer\n",
                static_cast<long long>(doc.memory->batch_size),
                static_cast<long long>(doc.memory->batch_bytes), doc.memory->batch_bytes / 1e6);
    for (const PlanFieldMemoryDoc& f : doc.memory->fields) {
      std::printf(
          "  %-12s %s, %lld bytes/sample at offset %lld\n", f.field.c_str(),
          TypeText(json{{"dtype", std::string(DTypeName(f.dtype))}, {"dims", f.sample_shape}})
              .c_str(),
          static_cast<long long>(f.bytes_per_sample), static_cast<long long>(f.offset));
    }
  }
  std::printf("targets: cpu");
  for (const std::string& t : doc.kernels.cpu_targets) std::printf(" %s", t.c_str());
  std::printf("; cuda %s%s\n",
              doc.kernels.cuda_target.empty() ? "none" : doc.kernels.cuda_target.c_str(),
              doc.kernels.cuda_note.empty() ? "" : (" (" + doc.kernels.cuda_note + ")").c_str());
  if (doc.tuned) {
    std::printf("tuned: threads %d, in_flight %d, prefetch %d, cpu budget %d: %.1f images/s %s\n",
                doc.tuned->threads, doc.tuned->in_flight, doc.tuned->prefetch,
                doc.tuned->cpu_budget, doc.tuned->images_per_second,
                doc.tuned->info.dump().c_str());
  } else {
    std::printf("tuned: no (`sluice tune PLAN --profile HW.yaml` writes tuned knobs)\n");
  }
}

}  // namespace

int InspectPlan(const std::string& dir, bool as_json) {
  auto doc = PlanDocument::Read(dir, "plan `" + dir + "`");
  if (!doc) {
    std::cerr << doc.error().ToString() << "\n";
    return 1;
  }
  const json document = doc->ToJson();
  std::map<std::string, std::string> variables;
  // The source first: a variable is reported where a user sets it.
  if (document.contains("source")) FindVariables(document["source"], "source", variables);
  FindVariables(document, "", variables);
  auto check = Plan::Verify(dir);
  const std::string kernels_status = check ? "matches" : check.error().message;
  if (as_json) {
    json vars = json::array();
    for (const auto& [name, where] : variables) vars.push_back({{"name", name}, {"in", where}});
    json out{{"plan", dir},
             {"variables", vars},
             {"kernels_check", {{"ok", check.has_value()}, {"detail", kernels_status}}},
             {"document", document}};
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  std::printf("plan: %s (%s), from %s\n", dir.c_str(), doc->name.c_str(), doc->spec_file.c_str());
  std::printf("versions: plan format %d, compiled by sluice %s\n", doc->format_version,
              doc->compiler_version.c_str());
  std::printf("hashes: spec %s; kernels.so %s (%lld bytes): %s\n", doc->spec_hash.c_str(),
              doc->kernels.hash.c_str(), static_cast<long long>(doc->kernels.bytes),
              kernels_status.c_str());
  std::printf("variables to bind:");
  if (variables.empty()) std::printf(" none");
  for (const auto& [name, where] : variables) std::printf(" %s (%s)", name.c_str(), where.c_str());
  std::printf("\nsource: %s %s\n", doc->source_format.c_str(), doc->source_params.dump().c_str());
  PrintGraph(*doc);
  PrintGroups(*doc);
  PrintPlacement(*doc);
  PrintRest(*doc);
  return 0;
}

}  // namespace sluice::cli
