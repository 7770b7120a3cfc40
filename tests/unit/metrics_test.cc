// Metrics takes registered collectors (service/ops/metrics_collector.h) instead of knowing the
// types of the subsystems it reports: a collector's families appear in /metrics after the built-in
// ones; the components' collectors (backup shipping, node registration) keep their metric names,
// labels and HELP texts byte for byte (dashboards and alerts query them). Also the components'
// wiring: what NodeRegistration registers and advertises, and QueuePush's flag parsing.
#include "service/ops/metrics.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "components/backup_shipping/backup_shipping.h"
#include "components/node_registry/node_registration.h"
#include "components/queue_push/queue_push.h"

namespace kvc {
namespace {

using service::ScrapedFamily;

class FixedCollector : public service::MetricsCollector {
 public:
  void Collect(std::vector<ScrapedFamily>* out) const override {
    ScrapedFamily f = ScrapedFamily::Counter("kvc_test_things_total", "Things counted, by kind");
    f.Add(3, {{"database", "sales"}, {"kind", "a"}});
    out->push_back(std::move(f));
    out->push_back(ScrapedFamily::Gauge("kvc_test_empty", "A family without samples"));
  }
};

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(Metrics, RendersRegisteredCollectorsAfterTheBuiltInFamilies) {
  service::Metrics m(service::MetricsOptions{});
  const std::string before = m.Render();
  EXPECT_FALSE(Has(before, "kvc_test_things_total"));
  FixedCollector collector;
  m.AddCollector(&collector);
  const std::string text = m.Render();
  EXPECT_TRUE(Has(text, "# HELP kvc_test_things_total Things counted, by kind\n")) << text;
  EXPECT_TRUE(Has(text, "# TYPE kvc_test_things_total counter\n")) << text;
  EXPECT_TRUE(Has(text, "kvc_test_things_total{database=\"sales\",kind=\"a\"} 3")) << text;
  EXPECT_TRUE(Has(text, "# TYPE kvc_test_empty gauge\n")) << text;
  // Built-in families come first, then the collectors, then this process's figures.
  EXPECT_LT(text.find("kvconnect_connections_open"), text.find("kvc_test_things_total"));
  EXPECT_LT(text.find("kvc_test_things_total"), text.find("kvconnect_build_info"));
  m.Stop();
}

TEST(Metrics, BackupFamiliesKeepTheirNamesLabelsAndHelp) {
  backup::BackupStatus s;
  s.database = "sales";
  s.shipped_version = 42;
  s.lag_entries = 3;
  s.lag_ms = 2500;
  s.errors = 1;
  s.segments_shipped = 5;
  s.bytes_shipped = 1000;
  s.snapshots_taken = 2;
  class Backup : public service::MetricsCollector {
   public:
    explicit Backup(backup::BackupStatus s) : s_(std::move(s)) {}
    void Collect(std::vector<ScrapedFamily>* out) const override {
      components::CollectBackupStatuses({s_}, out);
    }

   private:
    backup::BackupStatus s_;
  } collector(s);
  service::Metrics m(service::MetricsOptions{});
  m.AddCollector(&collector);
  const std::string text = m.Render();
  for (const char* line : {
           "# HELP kvconnect_backup_shipped_version The last version shipped to the backup target",
           "# TYPE kvconnect_backup_shipped_version gauge",
           "kvconnect_backup_shipped_version{database=\"sales\"} 42",
           "# HELP kvconnect_backup_last_snapshot_timestamp_seconds When the newest snapshot in "
           "the backup target was taken (Unix time)",
           "# HELP kvconnect_backup_lag_commits Commits not yet shipped to the backup target",
           "kvconnect_backup_lag_commits{database=\"sales\"} 3",
           "# HELP kvconnect_backup_lag_seconds Age of the oldest commit not yet shipped (0: none "
           "pending)",
           "kvconnect_backup_lag_seconds{database=\"sales\"} 2.5",
           "# HELP kvconnect_backup_errors_total Failed shipping attempts (each is retried with "
           "backoff)",
           "# TYPE kvconnect_backup_errors_total counter",
           "# HELP kvconnect_backup_segments_total Log segments shipped",
           "# HELP kvconnect_backup_bytes_total Log bytes shipped",
           "kvconnect_backup_bytes_total{database=\"sales\"} 1000",
           "# HELP kvconnect_backup_snapshots_total Snapshots taken and stored",
       }) {
    EXPECT_TRUE(Has(text, std::string(line) + "\n")) << line << "\n" << text;
  }
  // No snapshot yet: no timestamp sample (the family is still declared).
  EXPECT_FALSE(Has(text, "kvconnect_backup_last_snapshot_timestamp_seconds{")) << text;
  m.Stop();
}

// A node registry that records what it is told.
class FakeRegistry : public storage::NodeRegistry {
 public:
  void Start(storage::NodeInfo self, int64_t heartbeat_ms, int64_t max_lag_ms) override {
    self_ = self;
    heartbeat_ms_ = heartbeat_ms;
    max_lag_ms_ = max_lag_ms;
  }
  std::vector<storage::NodeInfo> LiveNodes() const override { return live_; }
  int64_t ReplicaLagMs() const override { return lag_ms_; }
  bool ReadingFromReplica() const override { return lag_ms_ >= 0; }
  void Stop() override { ++stops_; }

  storage::NodeInfo self_;
  int64_t heartbeat_ms_ = 0;
  int64_t max_lag_ms_ = 0;
  std::vector<storage::NodeInfo> live_;
  int64_t lag_ms_ = -1;
  int stops_ = 0;
};

TEST(NodeRegistration, WiresPeersMetricsAndLeavesWhenShutdownBegins) {
  FakeRegistry registry;
  components::NodeRegistryOptions o;
  o.region = "eu";
  o.heartbeat_ms = 250;
  components::NodeRegistration node(&registry, o);
  storage::StorageOptions so;
  so.kind = "postgres";
  so.read_location = "host=standby";
  engine::EngineOptions eo;
  service::ServiceOptions svc;
  svc.public_url = "https://kv.example.com/";
  components::Wiring w{nullptr, &so, &eo, &svc};
  ASSERT_TRUE(node.Wire(w).ok());
  EXPECT_EQ(svc.self_consistency, "eventual");  // it reads from a standby
  ASSERT_EQ(w.collectors.size(), 1u);
  ASSERT_EQ(w.drain_hooks.size(), 1u);
  ASSERT_TRUE(node.Start(components::Started{"http://127.0.0.1:4512"}).ok());
  // --public-url (trailing slashes dropped) before the listener's URL; the options passed on.
  EXPECT_EQ(registry.self_.url, "https://kv.example.com");
  EXPECT_EQ(registry.self_.role, "eventual");
  EXPECT_EQ(registry.self_.region, "eu");
  EXPECT_EQ(registry.heartbeat_ms_, 250);
  EXPECT_EQ(registry.max_lag_ms_, 5000);
  // Peers: every live node but this one.
  registry.live_ = {registry.self_,
                    {"b", "http://b", "strong", "", 0, 0},
                    {"c", "http://c", "eventual", "", 0, 0}};
  ASSERT_TRUE(svc.peer_endpoints);
  auto peers = svc.peer_endpoints();
  std::sort(peers.begin(), peers.end());
  EXPECT_EQ(peers, (std::vector<std::pair<std::string, std::string>>{{"http://b", "strong"},
                                                                     {"http://c", "eventual"}}));
  // Its metrics: live nodes by role; the lag families only while it reads from a standby.
  std::vector<ScrapedFamily> families;
  w.collectors[0]->Collect(&families);
  ASSERT_EQ(families.size(), 1u);
  EXPECT_EQ(families[0].name, "kvconnect_nodes_live");
  EXPECT_EQ(families[0].help, "Live nodes in the node registry (PostgreSQL storage), by role");
  ASSERT_EQ(families[0].samples.size(), 2u);
  EXPECT_EQ(families[0].samples[0].value, 1.0);  // strong: b
  EXPECT_EQ(families[0].samples[1].value, 2.0);  // eventual: this node and c
  registry.lag_ms_ = 1500;
  families.clear();
  w.collectors[0]->Collect(&families);
  ASSERT_EQ(families.size(), 3u);
  EXPECT_EQ(families[1].name, "kvconnect_replica_lag_seconds");
  EXPECT_EQ(families[1].samples[0].value, 1.5);
  EXPECT_EQ(families[2].name, "kvconnect_reading_from_replica");
  // Shutdown begins: the node leaves the registry before the listeners close.
  w.drain_hooks[0]();
  EXPECT_EQ(registry.stops_, 1);
}

TEST(NodeRegistration, AdvertisesTheFlagFirstAndIsStrongWithoutAStandby) {
  FakeRegistry registry;
  components::NodeRegistryOptions o;
  o.advertise_url = "http://node-a:4512//";
  components::NodeRegistration node(&registry, o);
  storage::StorageOptions so;
  engine::EngineOptions eo;
  service::ServiceOptions svc;
  svc.public_url = "https://kv.example.com";
  components::Wiring w{nullptr, &so, &eo, &svc};
  ASSERT_TRUE(node.Wire(w).ok());
  EXPECT_EQ(svc.self_consistency, "strong");
  ASSERT_TRUE(node.Start(components::Started{"http://127.0.0.1:1"}).ok());
  EXPECT_EQ(registry.self_.url, "http://node-a:4512");
  EXPECT_EQ(registry.self_.role, "strong");
}

TEST(QueuePush, FlagsBecomeOptionsPerDatabase) {
  components::QueuePushFlags f;
  f.push = {"orders=https://example.com/hook"};
  f.secrets = {"orders=whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3"};
  f.timeout_ms = 40000;
  auto o = components::ParsePushFlags(f);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  ASSERT_EQ(o->count("orders"), 1u);
  EXPECT_EQ(o->at("orders").url, "https://example.com/hook");
  EXPECT_EQ(o->at("orders").secrets.size(), 1u);
  EXPECT_EQ(o->at("orders").visibility_ms, 80000);  // at least twice the timeout

  components::QueuePushFlags orphan;
  orphan.secrets = {"audit=whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3"};
  auto r = components::ParsePushFlags(orphan);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("which has no --queue-push URL"), std::string::npos);
  components::QueuePushFlags malformed;
  malformed.push = {"=https://example.com"};
  EXPECT_EQ(components::ParsePushFlags(malformed).status().code(), StatusCode::kInvalidArgument);
  // With nothing to push, the component registers nothing.
  components::QueuePush none{components::QueuePushFlags{}};
  storage::StorageOptions so;
  engine::EngineOptions eo;
  service::ServiceOptions svc;
  components::Wiring w{nullptr, &so, &eo, &svc};
  ASSERT_TRUE(none.Wire(w).ok());
  EXPECT_TRUE(w.engine_hooks.empty());
  none.Stop();
}

}  // namespace
}  // namespace kvc
