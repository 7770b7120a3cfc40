#include "storage/sqlite/checkpointer.h"

#include <spdlog/spdlog.h>

#include <utility>

#include "storage/sqlite/sqlite_backend.h"

namespace kvc::storage {

Checkpointer::Checkpointer(sqlite3* writer, int64_t wake_pages, int64_t limit_pages,
                           std::shared_ptr<CheckpointCounts> counts)
    : writer_(writer),
      wake_pages_(wake_pages),
      limit_pages_(limit_pages),
      counts_(std::move(counts)),
      conn_("sqlite checkpoint ") {}

Result<std::unique_ptr<Checkpointer>> Checkpointer::Start(
    sqlite3* writer, const std::string& path, const SqliteOptions& options, int64_t wake_pages,
    int64_t limit_pages, std::shared_ptr<CheckpointCounts> counts) {
  std::unique_ptr<Checkpointer> c(
      new Checkpointer(writer, wake_pages, limit_pages, std::move(counts)));
  // Read-write (a checkpoint writes the database file), never creating it.
  KVC_RETURN_IF_ERROR(c->conn_.Open(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX,
                                    options.busy_timeout_ms, "", options.vfs));
  // A connection learns that the file is in WAL mode when it first reads it; until then a
  // checkpoint on it does nothing (and says so only by reporting -1 frames).
  KVC_RETURN_IF_ERROR(c->conn_.Exec("select count(*) from sqlite_schema"));
  c->worker_.Start("kvc-checkpoint", [raw = c.get()] { raw->Loop(); });
  sqlite3_wal_autocheckpoint(writer, 0);
  sqlite3_wal_hook(writer, &Checkpointer::OnCommit, c.get());
  return c;
}

Checkpointer::~Checkpointer() {
  sqlite3_wal_hook(writer_, nullptr, nullptr);
  worker_.Stop(mu_, cv_);
}

int Checkpointer::OnCommit(void* self, sqlite3* db, const char* schema, int wal_pages) {
  auto* c = static_cast<Checkpointer*>(self);
  const int64_t pages = wal_pages;
  if (pages >= c->limit_pages_) {
    // Errors (SQLITE_BUSY while the thread's checkpoint runs) are left for the next commit's
    // hook to retry, as SQLite's own automatic checkpoint does: a checkpoint never decides the
    // fate of the commit that triggered it.
    const int rc =
        sqlite3_wal_checkpoint_v2(db, schema, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
    if (rc == SQLITE_OK) c->counts_->by_writer.fetch_add(1, std::memory_order_relaxed);
    MutexLock lock(c->mu_);
    c->last_pages_ = pages;
    return SQLITE_OK;
  }
  {
    MutexLock lock(c->mu_);
    if (pages < c->last_pages_) {  // the WAL was written from its start again
      ++c->restarts_;
      c->copied_ = 0;
    }
    c->last_pages_ = pages;
    if (c->wanted_ || pages - c->copied_ < c->wake_pages_) return SQLITE_OK;
    c->wanted_ = true;
  }
  c->cv_.NotifyOne();
  return SQLITE_OK;
}

void Checkpointer::Loop() {
  MutexLock lock(mu_);
  for (;;) {
    while (!worker_.stop_requested() && !wanted_) cv_.Wait(mu_);
    if (worker_.stop_requested()) return;
    wanted_ = false;
    const int64_t restarts = restarts_;
    lock.Unlock();
    int copied = 0;
    const int rc =
        sqlite3_wal_checkpoint_v2(conn_.db(), nullptr, SQLITE_CHECKPOINT_PASSIVE, nullptr, &copied);
    lock.Lock();
    if (rc == SQLITE_OK) {
      counts_->background.fetch_add(1, std::memory_order_relaxed);
      if (restarts == restarts_) copied_ = copied;
      failing_ = false;
    } else if (rc == SQLITE_BUSY) {
      counts_->busy.fetch_add(1, std::memory_order_relaxed);
    } else if (!failing_) {
      failing_ = true;
      spdlog::warn(
          "sqlite: a background checkpoint failed ({}); the writer's own checkpoint at the WAL "
          "limit still bounds the WAL",
          sqlite3_errstr(rc));
    }
  }
}

}  // namespace kvc::storage
