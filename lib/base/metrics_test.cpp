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

}  // namespace
}  // namespace nfsrdma::metrics
