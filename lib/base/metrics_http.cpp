#include "lib/base/metrics_http.hpp"

#include <httplib.h>

#include "lib/base/log.hpp"
#include "lib/base/metrics.hpp"

namespace nfsrdma::metrics {

Result<std::unique_ptr<HttpEndpoint>> HttpEndpoint::start(const std::string& address, std::vector<DebugPage> pages) {
  auto colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size()) {
    return Error{ErrorDomain::config, EINVAL, Action::fail, "metrics address '" + address + "' is not HOST:PORT"};
  }
  std::string host = address.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  int port = 0;
  try {
    port = std::stoi(address.substr(colon + 1));
  } catch (...) {
    port = -1;
  }
  if (port < 0 || port > 65535) {
    return Error{ErrorDomain::config, EINVAL, Action::fail, "metrics port in '" + address + "' is not a port"};
  }
  std::unique_ptr<HttpEndpoint> e(new HttpEndpoint);
  e->server_ = std::make_unique<httplib::Server>();
  // SO_REUSEADDR alone: httplib's default adds SO_REUSEPORT, which lets a
  // second process bind the same port and take every other scrape.
  e->server_->set_socket_options([](int sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  e->server_->Get("/metrics", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(registry().render(), "text/plain; version=0.0.4; charset=utf-8");
  });
  for (auto& page : pages) {
    e->server_->Get(page.path, [render = std::move(page.render)](const httplib::Request& req, httplib::Response& res) {
      std::map<std::string, std::string> query;
      for (const auto& [k, v] : req.params) query[k] = v;
      res.set_content(render(query), "text/plain; charset=utf-8");
    });
  }
  if (port == 0) {
    port = e->server_->bind_to_any_port(host);
    if (port < 0) port = 0;
  } else if (!e->server_->bind_to_port(host, port)) {
    port = 0;
  }
  if (port == 0) return sys_error(errno ? errno : EADDRINUSE, "metrics: cannot listen on " + address);
  e->bound_ = (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(port);
  e->thread_ = std::thread([s = e->server_.get()] { s->listen_after_bind(); });
  spdlog::info("metrics: serving Prometheus metrics on http://{}/metrics", e->bound_);
  return e;
}

HttpEndpoint::~HttpEndpoint() {
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace nfsrdma::metrics
