// Serves the metrics registry over HTTP for Prometheus: GET /metrics on
// ADDR:PORT, from a thread of its own, until destroyed.
#pragma once

#include <memory>
#include <string>
#include <thread>

#include "lib/base/result.hpp"

namespace httplib {
class Server;
}

namespace nfsrdma::metrics {

class HttpEndpoint {
 public:
  // `address` is HOST:PORT (HOST may be [v6]); port 0 picks a free one.
  static Result<std::unique_ptr<HttpEndpoint>> start(const std::string& address);
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
