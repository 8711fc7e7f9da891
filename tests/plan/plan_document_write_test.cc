// PlanDocument::Write: plan.json replaced whole, also with concurrent writers
// (two `sluice compile -o` or a compile and a `sluice tune` of one plan).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "plan/plan_document.h"

namespace sluice {
namespace {

namespace fs = std::filesystem;

TEST(PlanDocumentWrite, ConcurrentWritersOfOnePlanAllSucceed) {
  char tmpl[] = "/tmp/sluice_plan_write_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  constexpr int kThreads = 6, kRounds = 40;
  std::atomic<int> failures{0};
  std::string first_error;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      PlanDocument doc;
      doc.name = "writer_" + std::to_string(t) + std::string(4000, 'x');
      for (int r = 0; r < kRounds; ++r) {
        if (Status s = doc.Write(dir); !s && failures.fetch_add(1) == 0) {
          first_error = s.error().ToString();
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0) << first_error;
  // plan.json is one writer's document, whole, and nothing else is left.
  std::ifstream in(fs::path(dir) / "plan.json", std::ios::binary);
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(j.is_discarded()) << "plan.json is not whole JSON";
  EXPECT_EQ(j.value("name", std::string()).rfind("writer_", 0), 0u);
  int entries = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    ++entries;
    EXPECT_EQ(e.path().filename(), "plan.json");
  }
  EXPECT_EQ(entries, 1);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace sluice
