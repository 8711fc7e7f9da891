// The run report's HTML and charts (cli/report/): every section's chart is an
// inline <svg class="chart"> with data drawn in it, text is escaped, nothing
// refers to the network or runs a script; ticks are round numbers; the
// recorder's memory stays bounded over a long run. The browser check (the
// page as a person sees it) is tests/cli/report_browser_test.py.
#include "cli/report/run_report.h"

#include <gtest/gtest.h>

#include <regex>

#include "cli/report/svg_chart.h"
#include "tests/runtime/loader/loader_test_util.h"

namespace sluice::cli::report {
namespace {

ReportData Sample() {
  ReportData d;
  d.title = "demo <plan>";
  d.plan = {{"plan", "demo"}};
  d.machine = MachineSummary();
  d.result = {{"images/s", "123"}};
  for (int i = 0; i < 20; ++i) {
    StatsPoint p;
    p.t = 0.1 * i;
    p.samples = static_cast<uint64_t>(i * 40);
    p.batches = static_cast<uint64_t>(i * 10);
    p.wait_seconds = 0.02 * i;
    p.read_seconds = 0.01 * i;
    p.decode_seconds = 0.05 * i;
    p.kernel_seconds = 0.03 * i;
    p.workers = i < 10 ? 4 : 3;
    p.prefetch = 2;
    d.series.push_back(p);
  }
  for (int i = 0; i < 100; ++i) d.latencies.push_back(0.001 * (1 + i % 17));
  d.final_stats.samples = 760;
  d.final_stats.read_seconds = 0.19;
  d.final_stats.decode_seconds = 0.95;
  d.final_stats.kernel_seconds = 0.57;
  d.final_stats.consumer_wait_seconds = 0.38;
  d.final_stats.latency_max = 0.017;
  d.final_stats.bad_samples = 1;
  d.elapsed = 1.9;
  d.bad = {BadSample{"a/<b>.jpg", "truncated & bad", 0, 7}};
  return d;
}

TEST(RunReportTest, EverySectionHasAChartWithData) {
  const std::string html = RenderReport(Sample());
  for (const char* id : {"chart-throughput", "chart-latency", "chart-stages", "chart-stages-time",
                         "chart-wait", "chart-tuner"}) {
    const size_t at = html.find(std::string("<svg class=\"chart\" id=\"") + id + "\"");
    ASSERT_NE(at, std::string::npos) << id;
    const std::string svg = html.substr(at, html.find("</svg>", at) - at);
    EXPECT_TRUE(svg.find("class=\"series\"") != std::string::npos ||
                svg.find("class=\"bar\"") != std::string::npos)
        << id << " draws nothing";
    EXPECT_EQ(svg.find("no data"), std::string::npos) << id;
  }
  // The tuner's move (workers 4 -> 3 at t = 1 s) is listed.
  EXPECT_NE(html.find("workers 4 -&gt; 3"), std::string::npos);
  // Escaped text, self-contained.
  EXPECT_NE(html.find("demo &lt;plan&gt;"), std::string::npos);
  EXPECT_NE(html.find("a/&lt;b&gt;.jpg"), std::string::npos);
  EXPECT_NE(html.find("truncated &amp; bad"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_FALSE(std::regex_search(html, std::regex(R"((src|href)=\"https?:)")));
}

TEST(RunReportTest, EmptyRunDrawsAxesAndSaysNoData) {
  ReportData d;
  d.title = "empty";
  const std::string html = RenderReport(d);
  EXPECT_NE(html.find("id=\"chart-throughput\""), std::string::npos);
  EXPECT_NE(html.find("no data"), std::string::npos);
}

TEST(RunReportTest, TicksAreRoundAndCoverTheRange) {
  EXPECT_EQ(NiceTicks(0, 10), (std::vector<double>{0, 2, 4, 6, 8, 10}));
  EXPECT_EQ(NiceTicks(0, 1.05), (std::vector<double>{0, 0.5, 1}));
  const std::vector<double> t = NiceTicks(3, 997);
  EXPECT_EQ(t.front(), 200);
  EXPECT_EQ(t.back(), 800);
  EXPECT_EQ(Num(2.50), "2.5");
  EXPECT_EQ(Num(3.0), "3");
}

TEST(RunReportTest, RecorderKeepsAtMostMaxPoints) {
  using namespace testing_loader;
  SLUICE_REQUIRE_TEST_PLAN();
  ScopedDir data("report_data");
  MakeDataset(data.path(), 8);
  auto plan = Plan::Load(TestPlan().path, {{"DATA", data.path().string()}});
  ASSERT_TRUE(plan);
  auto loader = Loader::Create(*plan, {});
  ASSERT_TRUE(loader);
  RunRecorder recorder(0.0);
  for (size_t i = 0; i < 3 * RunRecorder::kMaxPoints; ++i) recorder.Observe(*loader, true);
  EXPECT_LE(recorder.points().size(), RunRecorder::kMaxPoints);
  EXPECT_GE(recorder.points().size(), RunRecorder::kMaxPoints / 2);
  for (size_t i = 1; i < recorder.points().size(); ++i) {
    EXPECT_LE(recorder.points()[i - 1].t, recorder.points()[i].t);
  }
}

}  // namespace
}  // namespace sluice::cli::report
