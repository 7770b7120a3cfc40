#include "components/node_registry/node_registration.h"

#include <spdlog/spdlog.h>

#include <utility>

#include "common/clock.h"
#include "common/random.h"

namespace kvc::components {

NodeRegistration::NodeRegistration(storage::NodeRegistry* nodes, NodeRegistryOptions options)
    : nodes_(nodes), options_(std::move(options)) {}

NodeRegistration::~NodeRegistration() { Stop(); }

Status NodeRegistration::Wire(Wiring& w) {
  id_ = HexEncode(RandomBytes(8));
  role_ = w.storage_options->read_location.empty() ? "strong" : "eventual";
  public_url_ = w.service->public_url;
  // Several nodes serve this storage: list the live ones in metadata answers.
  w.service->self_consistency = role_;
  w.service->peer_endpoints = [nodes = nodes_, self = id_] {
    std::vector<std::pair<std::string, std::string>> out;
    for (const storage::NodeInfo& n : nodes->LiveNodes()) {
      if (n.id != self) out.emplace_back(n.url, n.role);
    }
    return out;
  };
  w.collectors.push_back(this);
  w.drain_hooks.push_back([this] { Stop(); });  // others stop listing this node
  return Status::Ok();
}

Status NodeRegistration::Start(const Started& started) {
  storage::NodeInfo self;
  self.id = id_;
  self.url = !options_.advertise_url.empty() ? options_.advertise_url
             : !public_url_.empty()          ? public_url_
                                             : started.url;
  while (!self.url.empty() && self.url.back() == '/') self.url.pop_back();
  self.role = role_;
  self.region = options_.region;
  self.started_ms = NowUnixMs();
  nodes_->Start(self, options_.heartbeat_ms, options_.max_replica_lag_ms);
  spdlog::info("registered as a {} node at {}", self.role, self.url);
  return Status::Ok();
}

void NodeRegistration::Stop() { nodes_->Stop(); }  // idempotent

void NodeRegistration::Collect(std::vector<service::ScrapedFamily>* out) const {
  using F = service::ScrapedFamily;
  int64_t strong = 0;
  int64_t eventual = 0;
  for (const storage::NodeInfo& n : nodes_->LiveNodes())
    ++(n.role == "eventual" ? eventual : strong);
  F live = F::Gauge("kvconnect_nodes_live",
                    "Live nodes in the node registry (PostgreSQL storage), by role");
  live.Add(static_cast<double>(strong), {{"role", "strong"}});
  live.Add(static_cast<double>(eventual), {{"role", "eventual"}});
  out->push_back(std::move(live));
  const int64_t lag_ms = nodes_->ReplicaLagMs();
  if (lag_ms < 0) return;  // this node reads from no standby
  F lag = F::Gauge("kvconnect_replica_lag_seconds",
                   "Replay lag of the standby this node reads from, as last measured");
  lag.Add(static_cast<double>(lag_ms) / 1000.0);
  out->push_back(std::move(lag));
  F on = F::Gauge("kvconnect_reading_from_replica",
                  "1 while reads go to the standby, 0 while they go to the primary");
  on.Add(nodes_->ReadingFromReplica() ? 1.0 : 0.0);
  out->push_back(std::move(on));
}

}  // namespace kvc::components
