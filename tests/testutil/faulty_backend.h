// A storage::Backend wrapper that injects failures into the writer, to show that storage errors
// surface as error answers and never as half-applied writes.
//
// A FaultPlan says which writer call fails (the n-th call counted from arming, or every call of
// one kind) and how:
//   kError      the call returns an error and does nothing (e.g. an I/O error);
//   kDiskFull   like kError with SQLite's "database or disk is full" text;
//   kCommitLost Commit() rolls back and returns an error (a failed fsync whose data is gone);
//   kCommitKept Commit() commits and then returns an error (a failed fsync whose data reached
//               the disk anyway: the outcome the caller cannot know).
//   kConflict   Commit() rolls back, runs the plan's conflict hook (another writer committing
//               in between, if the test says so) and returns storage::CommitConflict, as an
//               optimistic backend does; pair it with FaultyBackend's capability edit that sets
//               optimistic_conflicts.
//
// FaultyBackend reports the wrapped backend's capabilities, changed by an optional edit (a
// backend without a change log, optimistic, with transaction limits). With a scan-rows hook set
// on the plan, its readers run the hook on their own thread after each ScanRows, before the
// rows reach the caller: a test can commit a write between a snapshot and what is done with
// its rows.
//
// Thread-safety: FaultPlan is thread-safe but for set_conflict_hook and set_scan_rows_hook (set
// them before arming, and the scan-rows hook before the backend opens its readers);
// the wrapped objects keep the wrapped ones' rules.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "storage/backend.h"

namespace kvc::testutil {

enum class FaultKind { kError, kDiskFull, kCommitLost, kCommitKept, kConflict };
enum class WriterOp {
  kBegin,
  kGet,
  kPut,
  kDelete,
  kQueue,
  kSetDataVersion,
  kSavepoint,
  kRelease,
  kRollbackTo,
  kDeleteExpired,
  kEarliestExpiry,
  kCommit,
  kQueueDelivery,  // the Writer::Queue* primitives but QueueAddDead
  kQueueAddDead,
};

class FaultPlan {
 public:
  // Fails the n-th (1-based) writer call from now on, once.
  void FailNthCall(int64_t n, FaultKind kind) {
    kind_ = kind;
    only_op_ = -1;
    calls_ = 0;
    times_ = 1;
    target_ = n;
  }
  // Fails the next `times` calls of `op` in a row.
  void FailNextOps(WriterOp op, int64_t times, FaultKind kind) {
    kind_ = kind;
    calls_ = 0;
    only_op_ = static_cast<int>(op);
    times_ = times;
    target_ = 1;
  }
  // Runs with the wrapped writer (no transaction open) each time a kConflict fault fires.
  using ConflictHook = std::function<void(storage::Writer& inner)>;
  void set_conflict_hook(ConflictHook hook) { conflict_hook_ = std::move(hook); }
  const ConflictHook& conflict_hook() const { return conflict_hook_; }
  // Runs on a reader's thread after each of its ScanRows calls (see the file comment).
  void set_scan_rows_hook(std::function<void()> hook) { scan_rows_hook_ = std::move(hook); }
  const std::function<void()>& scan_rows_hook() const { return scan_rows_hook_; }
  // Fails the next call of `op`, once.
  void FailNextOp(WriterOp op, FaultKind kind) { FailNthOp(op, 1, kind); }
  // Fails the n-th (1-based) call of `op` from now on, once.
  void FailNthOp(WriterOp op, int64_t n, FaultKind kind) {
    kind_ = kind;
    calls_ = 0;
    only_op_ = static_cast<int>(op);
    times_ = 1;
    target_ = n;
  }
  void Disarm() { target_ = -1; }
  int64_t fired() const { return fired_; }
  int64_t calls() const { return calls_; }

  // Called by the wrapper before each writer call: true if this one must fail.
  bool ShouldFail(WriterOp op) {
    if (target_ < 0) return false;
    if (only_op_ >= 0 && only_op_ != static_cast<int>(op)) return false;
    if (++calls_ != target_) return false;
    ++fired_;
    if (--times_ > 0) {
      ++target_;  // the next call fails too
    } else {
      target_ = -1;
    }
    return true;
  }
  FaultKind kind() const { return kind_; }

 private:
  std::atomic<int64_t> target_{-1};
  std::atomic<int64_t> calls_{0};
  std::atomic<int> only_op_{-1};
  std::atomic<FaultKind> kind_{FaultKind::kError};
  std::atomic<int64_t> fired_{0};
  std::atomic<int64_t> times_{1};
  ConflictHook conflict_hook_;
  std::function<void()> scan_rows_hook_;
};

class FaultyWriter : public storage::Writer, public storage::QueueStore {
 public:
  FaultyWriter(std::unique_ptr<storage::Writer> inner, std::shared_ptr<FaultPlan> plan)
      : inner_(std::move(inner)), plan_(std::move(plan)), queue_(inner_->queue_store()) {}

  storage::QueueStore* queue_store() override { return queue_ ? this : nullptr; }
  storage::ChangeLogWriter* change_log() override { return inner_->change_log(); }

  Result<int64_t> Begin() override {
    if (plan_->ShouldFail(WriterOp::kBegin)) return Injected();
    return inner_->Begin();
  }
  Result<std::optional<storage::StoredRow>> Get(std::string_view key) override {
    if (plan_->ShouldFail(WriterOp::kGet)) return Injected();
    return inner_->Get(key);
  }
  Status Put(std::string_view key, const storage::StoredRow& row) override {
    return Guard(WriterOp::kPut, [&] { return inner_->Put(key, row); });
  }
  Status Delete(std::string_view key) override {
    return Guard(WriterOp::kDelete, [&] { return inner_->Delete(key); });
  }
  Status AddQueueMessage(const storage::QueueRow& row) override {
    return Guard(WriterOp::kQueue, [&] { return queue_->AddQueueMessage(row); });
  }
  Status SetDataVersion(int64_t v) override {
    return Guard(WriterOp::kSetDataVersion, [&] { return inner_->SetDataVersion(v); });
  }
  Status Savepoint() override {
    return Guard(WriterOp::kSavepoint, [&] { return inner_->Savepoint(); });
  }
  Status ReleaseSavepoint() override {
    return Guard(WriterOp::kRelease, [&] { return inner_->ReleaseSavepoint(); });
  }
  Status RollbackToSavepoint() override {
    return Guard(WriterOp::kRollbackTo, [&] { return inner_->RollbackToSavepoint(); });
  }
  Result<std::vector<std::string>> DeleteExpired(int64_t now_ms) override {
    if (plan_->ShouldFail(WriterOp::kDeleteExpired)) return Injected();
    return inner_->DeleteExpired(now_ms);
  }
  Result<std::optional<int64_t>> EarliestExpiry() override {
    if (plan_->ShouldFail(WriterOp::kEarliestExpiry)) return Injected();
    return inner_->EarliestExpiry();
  }
  Status Commit() override {
    if (!plan_->ShouldFail(WriterOp::kCommit)) return inner_->Commit();
    switch (plan_->kind()) {
      case FaultKind::kCommitKept: {
        Status s = inner_->Commit();
        return s.ok() ? Internal("injected: fsync failed after the data was written") : s;
      }
      case FaultKind::kConflict:
        inner_->Rollback();
        if (plan_->conflict_hook()) plan_->conflict_hook()(*inner_);
        return storage::CommitConflict("injected: another transaction committed first");
      case FaultKind::kCommitLost:
      default:
        inner_->Rollback();
        return Internal("injected: fsync failed; the transaction is lost");
    }
  }
  void Rollback() override { inner_->Rollback(); }

  // Queue delivery: forwarded to the wrapped writer's queue store, each call one
  // kQueueDelivery (or kQueueAddDead) call.
  Result<std::vector<storage::QueuedMessage>> QueueDue(int64_t now_ms, size_t limit) override {
    if (plan_->ShouldFail(WriterOp::kQueueDelivery)) return Injected();
    return queue_->QueueDue(now_ms, limit);
  }
  Result<std::optional<int64_t>> QueueEarliest(bool running) override {
    if (plan_->ShouldFail(WriterOp::kQueueDelivery)) return Injected();
    return queue_->QueueEarliest(running);
  }
  Status QueueLease(const storage::QueueRow& row, int64_t deadline_ms,
                    const storage::QueueDeliveryState& state) override {
    return Guard(WriterOp::kQueueDelivery,
                 [&] { return queue_->QueueLease(row, deadline_ms, state); });
  }
  Result<std::optional<storage::QueuedMessage>> QueueGetRunning(std::string_view id) override {
    if (plan_->ShouldFail(WriterOp::kQueueDelivery)) return Injected();
    return queue_->QueueGetRunning(id);
  }
  Result<std::vector<std::string>> QueueRunningDue(int64_t now_ms, size_t limit) override {
    if (plan_->ShouldFail(WriterOp::kQueueDelivery)) return Injected();
    return queue_->QueueRunningDue(now_ms, limit);
  }
  Status QueueSetDeadline(std::string_view id, int64_t deadline_ms) override {
    return Guard(WriterOp::kQueueDelivery,
                 [&] { return queue_->QueueSetDeadline(id, deadline_ms); });
  }
  Status QueueRemoveRunning(std::string_view id) override {
    return Guard(WriterOp::kQueueDelivery, [&] { return queue_->QueueRemoveRunning(id); });
  }
  Status QueueRequeue(const storage::QueueRow& row,
                      const storage::QueueDeliveryState& state) override {
    return Guard(WriterOp::kQueueDelivery, [&] { return queue_->QueueRequeue(row, state); });
  }
  Status QueueAddDead(const storage::DeadLetterRow& dead) override {
    return Guard(WriterOp::kQueueAddDead, [&] { return queue_->QueueAddDead(dead); });
  }
  Result<std::vector<storage::DeadLetterRow>> QueueListDead(std::string_view after,
                                                            size_t limit) override {
    if (plan_->ShouldFail(WriterOp::kQueueDelivery)) return Injected();
    return queue_->QueueListDead(after, limit);
  }
  Result<std::optional<storage::DeadLetterRow>> QueueTakeDead(std::string_view id) override {
    if (plan_->ShouldFail(WriterOp::kQueueDelivery)) return Injected();
    return queue_->QueueTakeDead(id);
  }
  Result<int64_t> QueuePruneDead(int64_t before_ms) override {
    if (plan_->ShouldFail(WriterOp::kQueueDelivery)) return Injected();
    return queue_->QueuePruneDead(before_ms);
  }
  Result<storage::QueueTableCounts> QueueCounts(int64_t now_ms) override {
    if (plan_->ShouldFail(WriterOp::kQueueDelivery)) return Injected();
    return queue_->QueueCounts(now_ms);
  }

 private:
  Status Injected() const {
    return Internal(plan_->kind() == FaultKind::kDiskFull ? "injected: database or disk is full"
                                                          : "injected: I/O error");
  }
  template <typename F>
  Status Guard(WriterOp op, F&& call) {
    if (plan_->ShouldFail(op)) return Injected();
    return call();
  }

  std::unique_ptr<storage::Writer> inner_;
  std::shared_ptr<FaultPlan> plan_;
  storage::QueueStore* const queue_;  // inner_'s, or nullptr
};

// A reader that runs the plan's scan-rows hook after each ScanRows; every other call goes to the
// wrapped reader as it is.
class HookedReader : public storage::Reader {
 public:
  HookedReader(std::unique_ptr<storage::Reader> inner, std::shared_ptr<FaultPlan> plan)
      : inner_(std::move(inner)), plan_(std::move(plan)) {}
  Status Begin() override { return inner_->Begin(); }
  Status Scan(const ReadRange& range, int64_t now_ms, std::vector<Entry>* out) override {
    return inner_->Scan(range, now_ms, out);
  }
  Result<std::optional<storage::StoredRow>> Get(std::string_view key) override {
    return inner_->Get(key);
  }
  Status ScanRows(const ReadRange& range, std::vector<storage::KeyedRow>* out) override {
    Status s = inner_->ScanRows(range, out);
    plan_->scan_rows_hook()();
    return s;
  }
  Result<int64_t> DataVersion() override { return inner_->DataVersion(); }
  Result<int64_t> GetAlone(const std::vector<std::string>& keys,
                           std::vector<std::optional<storage::StoredRow>>* rows) override {
    return inner_->GetAlone(keys, rows);
  }
  Result<int64_t> ScanAlone(const ReadRange& range, int64_t now_ms,
                            std::vector<Entry>* out) override {
    return inner_->ScanAlone(range, now_ms, out);
  }
  bool snapshot_is_strong() const override { return inner_->snapshot_is_strong(); }
  void End() override { inner_->End(); }
  Result<storage::StorageStats> Stats() override { return inner_->Stats(); }
  Result<storage::QueueTableCounts> QueueCounts(int64_t now_ms) override {
    return inner_->QueueCounts(now_ms);
  }
  Status ReadChangeLog(int64_t after_version, size_t max_entries,
                       std::vector<storage::ChangeLogRow>* out) override {
    return inner_->ReadChangeLog(after_version, max_entries, out);
  }
  Result<storage::ChangeLogStats> ChangeLogStatsAfter(int64_t after_version) override {
    return inner_->ChangeLogStatsAfter(after_version);
  }
  Status ScanQueueMessages(bool running, const storage::QueueCursor& after, size_t limit,
                           std::vector<storage::QueuedMessage>* out) override {
    return inner_->ScanQueueMessages(running, after, limit, out);
  }
  Status ScanDeadLetters(std::string_view after, size_t limit,
                         std::vector<storage::DeadLetterRow>* out) override {
    return inner_->ScanDeadLetters(after, limit, out);
  }

 private:
  std::unique_ptr<storage::Reader> inner_;
  std::shared_ptr<FaultPlan> plan_;
};

class FaultyBackend : public storage::Backend {
 public:
  using CapabilityEdit = std::function<void(storage::BackendCapabilities*)>;
  FaultyBackend(std::unique_ptr<storage::Backend> inner, std::shared_ptr<FaultPlan> plan,
                CapabilityEdit edit = {})
      : inner_(std::move(inner)), plan_(std::move(plan)), edit_(std::move(edit)) {}
  const std::string& database_id() const override { return inner_->database_id(); }
  storage::BackendCapabilities capabilities() const override {
    storage::BackendCapabilities c = inner_->capabilities();
    if (edit_) edit_(&c);
    return c;
  }
  Result<int64_t> LoadDataVersion() override { return inner_->LoadDataVersion(); }
  Result<std::unique_ptr<storage::Reader>> OpenReader() override {
    KVC_ASSIGN_OR_RETURN(auto r, inner_->OpenReader());
    if (!plan_->scan_rows_hook()) return r;
    return std::unique_ptr<storage::Reader>(std::make_unique<HookedReader>(std::move(r), plan_));
  }
  Result<std::unique_ptr<storage::Writer>> OpenWriter() override {
    KVC_ASSIGN_OR_RETURN(auto w, inner_->OpenWriter());
    return std::unique_ptr<storage::Writer>(std::make_unique<FaultyWriter>(std::move(w), plan_));
  }

 private:
  std::unique_ptr<storage::Backend> inner_;
  std::shared_ptr<FaultPlan> plan_;
  CapabilityEdit edit_;
};

}  // namespace kvc::testutil
