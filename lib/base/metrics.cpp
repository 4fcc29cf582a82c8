#include "lib/base/metrics.hpp"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "lib/base/procfs.hpp"
#include "lib/base/result.hpp"

namespace nfsrdma::metrics {

namespace {

std::string escape(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

std::string render_labels(const Labels& labels) {
  std::string s;
  for (const auto& [k, v] : labels) s += (s.empty() ? "" : ",") + k + "=\"" + escape(v) + "\"";
  return s;
}

std::string number(double v) {
  if (std::isinf(v)) return "+Inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

std::string series(const std::string& name, const std::string& labels, const std::string& extra = {}) {
  std::string l = labels;
  if (!extra.empty()) l += (l.empty() ? "" : ",") + extra;
  return l.empty() ? name : name + "{" + l + "}";
}

// The process's own figures, under the names Prometheus's client libraries
// give them, read from /proc at each scrape.
std::string process_metrics() {
  const auto f = proc_stat_fields("/proc/self/stat");
  if (f.size() <= 24) return "";
  auto field = [&](int n) { return std::stod(f[n]); };  // proc_pid_stat(5)'s numbering
  const double ticks = static_cast<double>(::sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(::sysconf(_SC_PAGESIZE));
  std::size_t fds = 0;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec); !ec && it != std::filesystem::directory_iterator();
       it.increment(ec)) {
    ++fds;
  }
  std::string out;
  auto one = [&](const char* name, const char* type, const char* help, double v) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + name + " " +
           number(v) + "\n";
  };
  one("process_cpu_seconds_total", "counter", "User and system CPU time spent, in seconds", (field(14) + field(15)) / ticks);
  one("process_resident_memory_bytes", "gauge", "Resident memory size, in bytes", field(24) * page);
  one("process_virtual_memory_bytes", "gauge", "Virtual memory size, in bytes", field(23));
  one("process_threads", "gauge", "Threads in the process", field(20));
  one("process_open_fds", "gauge", "Open file descriptors", static_cast<double>(fds));
  return out;
}

}  // namespace

void Histogram::observe(double seconds) {
  std::size_t i = 0;
  while (i < kBounds.size() && seconds > kBounds[i]) ++i;
  if (i < kBounds.size()) buckets_[i].fetch_add(1, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
  sum_ns_.fetch_add(static_cast<std::uint64_t>(std::max(seconds, 0.0) * 1e9), std::memory_order_relaxed);
}

Registry::Family& Registry::family(const std::string& name, const std::string& help, Kind kind) {
  auto [it, fresh] = families_.try_emplace(name);
  if (fresh) {
    it->second.kind = kind;
    it->second.help = help;
  }
  NFSRDMA_CHECK(it->second.kind == kind);  // one name, one kind
  return it->second;
}

Counter& Registry::counter(const std::string& name, const std::string& help, const Labels& labels) {
  std::lock_guard lk(mu_);
  auto& slot = family(name, help, Kind::counter).counters[render_labels(labels)];
  if (!slot) slot = std::make_unique<Counter>();
  return *slot;
}

Gauge& Registry::gauge(const std::string& name, const std::string& help, const Labels& labels) {
  std::lock_guard lk(mu_);
  auto& slot = family(name, help, Kind::gauge).gauges[render_labels(labels)];
  if (!slot) slot = std::make_unique<Gauge>();
  return *slot;
}

Histogram& Registry::histogram(const std::string& name, const std::string& help, const Labels& labels) {
  std::lock_guard lk(mu_);
  auto& slot = family(name, help, Kind::histogram).histograms[render_labels(labels)];
  if (!slot) slot = std::make_unique<Histogram>();
  return *slot;
}

std::string Registry::render() const {
  std::lock_guard lk(mu_);
  std::string out;
  for (const auto& [name, f] : families_) {
    static constexpr const char* kType[] = {"counter", "gauge", "histogram"};
    out += "# HELP " + name + " " + f.help + "\n# TYPE " + name + " " + kType[static_cast<int>(f.kind)] + "\n";
    for (const auto& [l, c] : f.counters) out += series(name, l) + " " + std::to_string(c->value()) + "\n";
    for (const auto& [l, g] : f.gauges) out += series(name, l) + " " + std::to_string(g->value()) + "\n";
    for (const auto& [l, h] : f.histograms) {
      std::uint64_t cumulative = 0;
      for (std::size_t i = 0; i < Histogram::kBounds.size(); ++i) {
        cumulative += h->bucket(i);
        out += series(name + "_bucket", l, "le=\"" + number(Histogram::kBounds[i]) + "\"") + " " +
               std::to_string(cumulative) + "\n";
      }
      out += series(name + "_bucket", l, "le=\"+Inf\"") + " " + std::to_string(h->count()) + "\n";
      out += series(name + "_sum", l) + " " + number(h->sum()) + "\n";
      out += series(name + "_count", l) + " " + std::to_string(h->count()) + "\n";
    }
  }
  return out + process_metrics();
}

Registry& registry() {
  static Registry r;
  return r;
}

CallSeries call_series(const std::string& prefix, const CallSeriesHelp& help, const Labels& labels) {
  Registry& r = registry();
  return {&r.counter(prefix + "_calls_total", help.calls, labels),
          &r.counter(prefix + "_errors_total", help.errors, labels),
          &r.histogram(prefix + "_call_seconds", help.seconds, labels)};
}

}  // namespace nfsrdma::metrics
