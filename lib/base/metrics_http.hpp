// Serves the metrics registry over HTTP for Prometheus: GET /metrics on
// ADDR:PORT, from a thread of its own, until destroyed; and the owner's debug
// pages beside it (plain text, e.g. the server's /debug/rdma).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "lib/base/result.hpp"

namespace httplib {
class Server;
}

namespace nfsrdma::metrics {

// A plain-text page, made on the endpoint's thread from the request's query
// parameters (the last value of each).
struct DebugPage {
  std::string path;
  std::function<std::string(const std::map<std::string, std::string>& query)> render;
};

class HttpEndpoint {
 public:
  // `address` is HOST:PORT (HOST may be [v6]); port 0 picks a free one.
  static Result<std::unique_ptr<HttpEndpoint>> start(const std::string& address, std::vector<DebugPage> pages = {});
  ~HttpEndpoint();
  // HOST:PORT actually bound.
  const std::string& address() const { return bound_; }

 private:
  HttpEndpoint() = default;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  std::string bound_;
};

}  // namespace nfsrdma::metrics
