#include "lib/base/metrics.hpp"

#include <gtest/gtest.h>

namespace nfsrdma::metrics {
namespace {

TEST(Metrics, RendersThePrometheusTextFormat) {
  Registry r;
  r.counter("x_calls_total", "Calls.", {{"proc", "READ"}}).inc(3);
  r.counter("x_calls_total", "Calls.", {{"proc", "WRITE"}}).inc();
  r.gauge("x_credits", "Credits in use.").set(-2);
  auto& h = r.histogram("x_seconds", "Latency.", {{"proc", "READ"}});
  h.observe(0.00002);   // second bucket (2.5e-5)
  h.observe(0.003);     // 5e-3 bucket
  h.observe(100);       // only +Inf
  std::string text = r.render();
  EXPECT_NE(text.find("# HELP x_calls_total Calls.\n# TYPE x_calls_total counter\n"), std::string::npos) << text;
  EXPECT_NE(text.find("x_calls_total{proc=\"READ\"} 3\n"), std::string::npos) << text;
  EXPECT_NE(text.find("x_calls_total{proc=\"WRITE\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("# TYPE x_credits gauge\nx_credits -2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("x_seconds_bucket{proc=\"READ\",le=\"1e-05\"} 0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("x_seconds_bucket{proc=\"READ\",le=\"2.5e-05\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("x_seconds_bucket{proc=\"READ\",le=\"0.005\"} 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("x_seconds_bucket{proc=\"READ\",le=\"10\"} 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("x_seconds_bucket{proc=\"READ\",le=\"+Inf\"} 3\n"), std::string::npos) << text;
  EXPECT_NE(text.find("x_seconds_count{proc=\"READ\"} 3\n"), std::string::npos) << text;
}

TEST(Metrics, SameSeriesSameObjectAndLabelsEscaped) {
  Registry r;
  EXPECT_EQ(&r.counter("c", "h", {{"a", "1"}}), &r.counter("c", "h", {{"a", "1"}}));
  EXPECT_NE(&r.counter("c", "h", {{"a", "1"}}), &r.counter("c", "h", {{"a", "2"}}));
  r.counter("c", "h", {{"a", "q\"\\\n"}}).inc();
  EXPECT_NE(r.render().find("c{a=\"q\\\"\\\\\\n\"} 1"), std::string::npos) << r.render();
}

TEST(Metrics, TheProcessesOwnFiguresComeWithEveryRender) {
  Registry r;
  std::string text = r.render();
  auto value = [&](const std::string& name) {
    auto at = text.find("\n" + name + " ");
    return at == std::string::npos ? -1.0 : std::stod(text.substr(at + name.size() + 2));
  };
  volatile double spin = 0;
  for (int i = 0; i < 20'000'000; ++i) spin = spin + i;  // some CPU time to see
  text = r.render();
  EXPECT_GT(value("process_resident_memory_bytes"), 1 << 20) << text;
  EXPECT_GT(value("process_virtual_memory_bytes"), value("process_resident_memory_bytes"));
  EXPECT_GT(value("process_cpu_seconds_total"), 0.0) << text;
  EXPECT_GE(value("process_threads"), 1.0);
  EXPECT_GE(value("process_open_fds"), 3.0);
  EXPECT_NE(text.find("# TYPE process_cpu_seconds_total counter"), std::string::npos);
}

}  // namespace
}  // namespace nfsrdma::metrics
