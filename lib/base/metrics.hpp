// Metrics registry (DESIGN.md lib/base): counters, gauges and histograms in
// named families with labels, rendered in the Prometheus text format. Series
// are made once (at start-up or first use) and then updated lock-free, so the
// data path pays an atomic add per update.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace nfsrdma::metrics {

class Counter {
 public:
  void inc(std::uint64_t n = 1) { v_.fetch_add(n, std::memory_order_relaxed); }
  std::uint64_t value() const { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::uint64_t> v_{0};
};

class Gauge {
 public:
  void add(std::int64_t n) { v_.fetch_add(n, std::memory_order_relaxed); }
  void set(std::int64_t n) { v_.store(n, std::memory_order_relaxed); }
  std::int64_t value() const { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::int64_t> v_{0};
};

// Latency in seconds, with buckets from 10 µs to 10 s.
class Histogram {
 public:
  static constexpr std::array<double, 19> kBounds = {1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2,
                                                     2.5e-2, 5e-2, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
  void observe(double seconds);
  std::uint64_t count() const { return count_.load(std::memory_order_relaxed); }
  double sum() const { return static_cast<double>(sum_ns_.load(std::memory_order_relaxed)) * 1e-9; }
  std::uint64_t bucket(std::size_t i) const { return buckets_[i].load(std::memory_order_relaxed); }

 private:
  std::array<std::atomic<std::uint64_t>, kBounds.size()> buckets_{};  // not cumulative; summed when rendered
  std::atomic<std::uint64_t> count_{0}, sum_ns_{0};
};

using Labels = std::vector<std::pair<std::string, std::string>>;

class Registry {
 public:
  // The series `name{labels}`, made on first use; the same reference after.
  Counter& counter(const std::string& name, const std::string& help, const Labels& labels = {});
  Gauge& gauge(const std::string& name, const std::string& help, const Labels& labels = {});
  Histogram& histogram(const std::string& name, const std::string& help, const Labels& labels = {});

  // Every family, in the Prometheus text exposition format (version 0.0.4).
  std::string render() const;

 private:
  enum class Kind : std::uint8_t { counter, gauge, histogram };
  struct Family {
    Kind kind;
    std::string help;
    std::map<std::string, std::unique_ptr<Counter>> counters;  // by rendered label set
    std::map<std::string, std::unique_ptr<Gauge>> gauges;
    std::map<std::string, std::unique_ptr<Histogram>> histograms;
  };
  Family& family(const std::string& name, const std::string& help, Kind kind);
  mutable std::mutex mu_;  // guards families_ (series never move once made)
  std::map<std::string, Family> families_;
};

// The process's registry.
Registry& registry();

// The three series an RPC side keeps per procedure, in the process's
// registry: `prefix`_calls_total, `prefix`_errors_total and
// `prefix`_call_seconds, with `labels`.
struct CallSeries {
  Counter* calls = nullptr;
  Counter* errors = nullptr;
  Histogram* seconds = nullptr;
};
struct CallSeriesHelp {
  const char* calls;
  const char* errors;
  const char* seconds;
};
CallSeries call_series(const std::string& prefix, const CallSeriesHelp& help, const Labels& labels);

}  // namespace nfsrdma::metrics
