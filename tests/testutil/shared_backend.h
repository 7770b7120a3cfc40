// A test backend that is NOT the exclusive writer of its database: several SharedBackends opened on
// one SQLite file (one per engine, as several nodes would share one database) serialize their
// transactions through a CommitBus and publish every commit to every engine's change feed, in
// commit order, the way a shared backend (PostgreSQL) with a notification channel does.
//
// Each published group holds one record at the transaction's data version with every change
// the transaction kept (changes of writes rolled back to their savepoint are dropped).
//
// Thread-safety: CommitBus is thread-safe; writers keep the wrapped writer's rules.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/mutex.h"
#include "storage/backend.h"

namespace kvc::testutil {

class CommitBus {
 public:
  using Callback = storage::Backend::CommitCallback;
  // Held from a writer's Begin to after its commit was published (one writer at a time).
  Mutex writer_mu;

  int Subscribe(Callback cb) {
    MutexLock lock(subs_mu_);
    subs_.emplace_back(++next_id_, std::move(cb));
    return next_id_;
  }
  // Waits for a publication in progress (it holds writer_mu).
  void Unsubscribe(int id) {
    MutexLock writers(writer_mu);
    MutexLock lock(subs_mu_);
    for (auto it = subs_.begin(); it != subs_.end(); ++it) {
      if (it->first == id) {
        subs_.erase(it);
        break;
      }
    }
  }
  void Publish(const storage::CommitGroup& g) KVC_REQUIRES(writer_mu) {
    std::vector<Callback> subs;
    {
      MutexLock lock(subs_mu_);
      for (auto& [id, cb] : subs_) subs.push_back(cb);
    }
    for (auto& cb : subs) cb(g);
  }

 private:
  Mutex subs_mu_;
  std::vector<std::pair<int, Callback>> subs_ KVC_GUARDED_BY(subs_mu_);
  int next_id_ KVC_GUARDED_BY(subs_mu_) = 0;
};

class SharedWriter : public storage::Writer, public storage::ChangeLogWriter {
 public:
  SharedWriter(std::unique_ptr<storage::Writer> inner, std::shared_ptr<CommitBus> bus)
      : inner_(std::move(inner)), bus_(std::move(bus)) {}

  storage::QueueStore* queue_store() override { return inner_->queue_store(); }
  storage::ChangeLogWriter* change_log() override { return this; }

  // Begin takes the bus's writer_mu and Commit or Rollback releases it: the lock spans calls
  // of the storage::Writer interface, which the analysis cannot follow, so these three are
  // not analysed.
  Result<int64_t> Begin() override KVC_NO_THREAD_SAFETY_ANALYSIS {
    bus_->writer_mu.Lock();
    changes_.clear();
    Result<int64_t> v = inner_->Begin();
    if (!v.ok()) bus_->writer_mu.Unlock();
    return v;
  }
  Result<std::optional<storage::StoredRow>> Get(std::string_view key) override {
    return inner_->Get(key);
  }
  Status Put(std::string_view key, const storage::StoredRow& row) override {
    KVC_RETURN_IF_ERROR(inner_->Put(key, row));
    changes_.push_back(storage::KeyChange{std::string(key), row});
    return Status::Ok();
  }
  Status Delete(std::string_view key) override {
    KVC_RETURN_IF_ERROR(inner_->Delete(key));
    changes_.push_back(storage::KeyChange{std::string(key), std::nullopt});
    return Status::Ok();
  }
  Status SetDataVersion(int64_t v) override {
    version_ = v;
    return inner_->SetDataVersion(v);
  }
  Status Savepoint() override {
    mark_ = changes_.size();
    return inner_->Savepoint();
  }
  Status ReleaseSavepoint() override { return inner_->ReleaseSavepoint(); }
  Status RollbackToSavepoint() override {
    changes_.resize(mark_);
    return inner_->RollbackToSavepoint();
  }
  Result<std::vector<std::string>> DeleteExpired(int64_t now_ms) override {
    KVC_ASSIGN_OR_RETURN(auto keys, inner_->DeleteExpired(now_ms));
    for (const auto& k : keys) changes_.push_back(storage::KeyChange{k, std::nullopt});
    return keys;
  }
  Result<std::optional<int64_t>> EarliestExpiry() override { return inner_->EarliestExpiry(); }
  // The engine logs every commit of this backend (change_feed_reads_log, as PostgreSQL's change
  // feed reads that log); here it lands in the SQLite change log.
  Status AppendChangeLog(const storage::ChangeLogRow& row) override {
    return inner_->change_log()->AppendChangeLog(row);
  }
  Status PruneChangeLog(int64_t through_version) override {
    return inner_->change_log()->PruneChangeLog(through_version);
  }
  Status Commit() override KVC_NO_THREAD_SAFETY_ANALYSIS {
    Status s = inner_->Commit();
    if (s.ok()) {
      storage::CommitGroup g;
      g.origin = storage::CommitOrigin::kOtherWriter;
      g.time_ms = NowUnixMs();
      g.records.push_back(storage::CommitRecord{version_, std::move(changes_)});
      bus_->Publish(g);
    }
    changes_.clear();
    bus_->writer_mu.Unlock();
    return s;
  }
  void Rollback() override KVC_NO_THREAD_SAFETY_ANALYSIS {
    inner_->Rollback();
    changes_.clear();
    bus_->writer_mu.Unlock();
  }

 private:
  std::unique_ptr<storage::Writer> inner_;
  std::shared_ptr<CommitBus> bus_;
  std::vector<storage::KeyChange> changes_;
  size_t mark_ = 0;
  int64_t version_ = 0;
};

class SharedBackend : public storage::Backend {
 public:
  SharedBackend(std::unique_ptr<storage::Backend> inner, std::shared_ptr<CommitBus> bus)
      : inner_(std::move(inner)), bus_(std::move(bus)) {}
  const std::string& database_id() const override { return inner_->database_id(); }
  // Shared like PostgreSQL: other writers, a change feed, every commit logged, and a failed
  // commit is not fatal.
  storage::BackendCapabilities capabilities() const override {
    storage::BackendCapabilities c = inner_->capabilities();
    c.exclusive_writer = false;
    c.on_commit_error = storage::CommitErrorPolicy::kReconnect;
    c.change_feed = true;
    c.change_feed_reads_log = true;
    return c;
  }
  Result<int64_t> LoadDataVersion() override { return inner_->LoadDataVersion(); }
  Result<std::unique_ptr<storage::Reader>> OpenReader() override { return inner_->OpenReader(); }
  Result<std::unique_ptr<storage::Writer>> OpenWriter() override {
    KVC_ASSIGN_OR_RETURN(auto w, inner_->OpenWriter());
    return std::unique_ptr<storage::Writer>(std::make_unique<SharedWriter>(std::move(w), bus_));
  }
  Result<std::unique_ptr<storage::ChangeFeed>> OpenChangeFeed(const CommitCallback& cb) override {
    struct Feed : storage::ChangeFeed {
      Feed(std::shared_ptr<CommitBus> b, int i) : bus(std::move(b)), id(i) {}
      ~Feed() override { bus->Unsubscribe(id); }
      std::shared_ptr<CommitBus> bus;
      int id;
    };
    const int id = bus_->Subscribe(cb);
    return std::unique_ptr<storage::ChangeFeed>(std::make_unique<Feed>(bus_, id));
  }

 private:
  std::unique_ptr<storage::Backend> inner_;
  std::shared_ptr<CommitBus> bus_;
};

}  // namespace kvc::testutil
