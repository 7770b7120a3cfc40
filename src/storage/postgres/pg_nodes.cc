#include "storage/postgres/pg_nodes.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <optional>

#include "common/clock.h"
#include "storage/postgres/pg_conn.h"

namespace kvc::storage {

using pg::Connection;
using pg::Params;
using pg::PgResult;

PgNodeRegistry::PgNodeRegistry(std::string conninfo, std::string read_conninfo,
                               std::shared_ptr<std::atomic<bool>> use_replica)
    : conninfo_(std::move(conninfo)),
      read_conninfo_(std::move(read_conninfo)),
      use_replica_(std::move(use_replica)) {}

PgNodeRegistry::~PgNodeRegistry() { Stop(); }

void PgNodeRegistry::Start(NodeInfo self, int64_t heartbeat_ms, int64_t max_replica_lag_ms) {
  self_ = std::move(self);
  heartbeat_ms_ = heartbeat_ms;
  max_lag_ms_ = max_replica_lag_ms;
  {
    MutexLock lock(mu_);
    live_ = {self_};
  }
  worker_.Start("kvc-nodes", [this] { Loop(); });
}

std::vector<NodeInfo> PgNodeRegistry::LiveNodes() const {
  MutexLock lock(mu_);
  return live_;
}

void PgNodeRegistry::Stop() {
  if (!worker_.Stop(mu_, cv_)) return;
  if (self_.id.empty()) return;
  Connection c(conninfo_, {{"target_session_attrs", "read-write"}, {"connect_timeout", "2"}},
               "postgres node registry");
  (void)c.Query("delete from kvc_nodes where id = $1", Params().Text(self_.id));
}

void PgNodeRegistry::Loop() {
  Connection primary(conninfo_, {{"target_session_attrs", "read-write"}}, "postgres node registry");
  Connection standby(read_conninfo_, {}, "postgres standby");
  bool warned = false;
  for (;;) {
    const int64_t now = NowUnixMs();
    // Heartbeat, and who else is live.
    auto beat = primary.Query(
        "insert into kvc_nodes (id, url, role, region, started_ms, heartbeat_ms) values ($1, $2, "
        "$3, $4, $5, $6) on conflict (id) do update set url = excluded.url, role = "
        "excluded.role, region = excluded.region, heartbeat_ms = excluded.heartbeat_ms",
        Params()
            .Text(self_.id)
            .Text(self_.url)
            .Text(self_.role)
            .Text(self_.region)
            .Int64(self_.started_ms)
            .Int64(now));
    std::optional<std::string> primary_lsn;
    if (beat.ok()) {
      auto live = primary.Query(
          "select id, url, role, region, started_ms, heartbeat_ms from kvc_nodes where "
          "heartbeat_ms >= $1 order by started_ms, id",
          Params().Int64(now - 5 * heartbeat_ms_));
      if (live.ok()) {
        std::vector<NodeInfo> nodes;
        bool has_self = false;
        for (int i = 0; i < live->rows(); ++i) {
          NodeInfo n{live->Bytes(i, 0), live->Bytes(i, 1), live->Bytes(i, 2),
                     live->Bytes(i, 3), live->Int(i, 4),   live->Int(i, 5)};
          has_self = has_self || n.id == self_.id;
          nodes.push_back(std::move(n));
        }
        if (!has_self) nodes.push_back(self_);
        MutexLock lock(mu_);
        live_ = std::move(nodes);
      }
      // Rows of nodes gone for a long time.
      (void)primary.Query("delete from kvc_nodes where heartbeat_ms < $1",
                          Params().Int64(now - 3600 * 1000));
      if (!read_conninfo_.empty()) {
        auto lsn = primary.Query("select pg_current_wal_lsn()::text", Params());
        if (lsn.ok() && lsn->rows() == 1) primary_lsn = lsn->Bytes(0, 0);
      }
    } else if (!warned) {
      spdlog::warn("node registry: {}", beat.status().message());
      warned = true;
    }
    if (beat.ok()) warned = false;
    if (!read_conninfo_.empty()) {
      // Replay lag of the standby, against the primary's position read just before.
      int64_t lag = -1;
      if (primary_lsn) {
        auto r = standby.Query(
            "select pg_last_wal_replay_lsn() >= $1::pg_lsn, coalesce((extract(epoch from now() - "
            "pg_last_xact_replay_timestamp()) * 1000)::bigint, 0)",
            Params().Text(*primary_lsn));
        if (r.ok() && r->rows() == 1)
          lag = r->Int(0, 0) != 0 ? 0 : std::max<int64_t>(r->Int(0, 1), 1);
      }
      lag_ms_.store(lag);
      const bool ok = lag >= 0 && lag <= max_lag_ms_;
      if (ok != use_replica_->load()) {
        spdlog::info("reads now go to the {} (standby lag {} ms, bound {} ms)",
                     ok ? "standby" : "primary", lag, max_lag_ms_);
      }
      use_replica_->store(ok);
    }
    if (WaitForNextBeat()) return;
  }
}

bool PgNodeRegistry::WaitForNextBeat() {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(heartbeat_ms_);
  MutexLock lock(mu_);
  while (!worker_.stop_requested()) {
    if (!cv_.WaitUntil(mu_, deadline)) break;
  }
  return worker_.stop_requested();
}

}  // namespace kvc::storage
