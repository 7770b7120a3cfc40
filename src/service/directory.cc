#include "service/directory.h"

#include <spdlog/spdlog.h>

#include <chrono>

namespace kvc::service {

const Directory::Database* Directory::Snapshot::Find(const std::string& name_or_id) const {
  auto n = id_by_name.find(name_or_id);
  auto it = by_id.find(n != id_by_name.end() ? n->second : name_or_id);
  if (it == by_id.end() && storage::LooksLikeUuid(name_or_id)) {
    std::string lower = name_or_id;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    it = by_id.find(lower);
  }
  return it == by_id.end() ? nullptr : &it->second;
}

const storage::AccessTokenRecord* Directory::Snapshot::Token(const std::string& id) const {
  auto it = tokens.find(id);
  return it == tokens.end() ? nullptr : &it->second;
}

Directory::Directory(storage::Catalog* catalog, BackendFactory factory, DirectoryOptions options)
    : catalog_(catalog),
      factory_(std::move(factory)),
      options_(std::move(options)),
      snap_(std::make_shared<Snapshot>()) {}

Directory::~Directory() { Stop(); }

Status Directory::Start() {
  KVC_RETURN_IF_ERROR(Reload(/*force=*/true));
  worker_.Start("kvc-directory", [this] { Loop(); });
  return Status::Ok();
}

void Directory::Stop() {
  if (!worker_.Stop(mu_, cv_)) return;
  // Lookups that were waiting for a reread get the last snapshot rather than no answer.
  std::vector<std::function<void(std::shared_ptr<const Snapshot>)>> waiting;
  {
    MutexLock lock(mu_);
    waiting.swap(waiting_);
  }
  for (auto& w : waiting) w(snapshot());
  std::shared_ptr<const Snapshot> last;
  {
    MutexLock lock(snap_mu_);
    last = std::move(snap_);
    snap_ = std::make_shared<Snapshot>();
  }
  if (last) {
    for (const auto& [id, db] : last->by_id) db.engine->Shutdown();
  }
  for (auto& e : retired_) e->Shutdown();
  retired_.clear();
}

std::shared_ptr<const Directory::Snapshot> Directory::snapshot() const {
  MutexLock lock(snap_mu_);
  return snap_;
}

void Directory::RefreshThen(std::function<void(std::shared_ptr<const Snapshot>)> done) {
  {
    MutexLock lock(mu_);
    if (!worker_.stop_requested()) {
      waiting_.push_back(std::move(done));
      cv_.NotifyAll();
      return;
    }
  }
  done(snapshot());  // stopped: answer with what we have
}

void Directory::Loop() {
  MutexLock lock(mu_);
  while (!worker_.stop_requested()) {
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::milliseconds(std::max<int64_t>(options_.poll_ms, 10));
    while (!worker_.stop_requested() && waiting_.empty()) {
      if (!cv_.WaitUntil(mu_, deadline)) break;  // poll time
    }
    if (worker_.stop_requested()) break;
    auto waiting = std::move(waiting_);
    waiting_.clear();
    lock.Unlock();
    // The change counter tells whether anything changed, so a flood of lookups for unknown
    // tokens costs one small query per round, not a full reread.
    Status s = Reload(/*force=*/false);
    if (!s.ok() && ++failed_reloads_ % 60 == 1) {
      spdlog::warn("cannot reread the catalog: {}", s.message());
    }
    ReapRetired();
    auto snap = snapshot();
    // Read caches that share a budget give back what others grew into (engine/cache_budget.h).
    for (const auto& [id, db] : snap->by_id) db.engine->TrimReadCache();
    for (auto& w : waiting) w(snap);
    lock.Lock();
  }
}

Status Directory::Reload(bool force) {
  KVC_ASSIGN_OR_RETURN(int64_t generation, catalog_->ChangeCounter());
  auto current = snapshot();
  if (!force && generation == current->generation) return Status::Ok();
  KVC_ASSIGN_OR_RETURN(auto dbs, catalog_->ListDatabases());
  KVC_ASSIGN_OR_RETURN(auto tokens, catalog_->ListTokens());

  auto next = std::make_shared<Snapshot>();
  next->generation = generation;
  Status first_error;
  for (auto& rec : dbs) {
    Database db;
    auto old = current->by_id.find(rec.id);
    if (old != current->by_id.end() && old->second.record.location == rec.location) {
      db.engine = old->second.engine;
    } else {
      auto backend = factory_(rec);
      if (!backend.ok()) {
        spdlog::error("cannot open database '{}' ({}): {}", rec.name, rec.location,
                      backend.status().message());
        if (first_error.ok()) first_error = backend.status();
        next->unavailable.push_back(rec.name);
        continue;
      }
      if ((*backend)->database_id() != rec.id) {
        spdlog::error("database at {} has id {}, but the catalog says {}; not serving '{}'",
                      rec.location, (*backend)->database_id(), rec.id, rec.name);
        if (first_error.ok()) first_error = Corruption("database id mismatch for " + rec.name);
        next->unavailable.push_back(rec.name);
        continue;
      }
      auto engine = engine::Engine::Open(std::move(*backend), options_.engine);
      if (!engine.ok()) {
        spdlog::error("cannot start database '{}': {}", rec.name, engine.status().message());
        if (first_error.ok()) first_error = engine.status();
        next->unavailable.push_back(rec.name);
        continue;
      }
      db.engine = std::shared_ptr<engine::Engine>(std::move(*engine));
      for (const EngineHook& hook : hooks_) hook(rec, db.engine);
      if (current->generation >= 0) spdlog::info("serving database '{}' ({})", rec.name, rec.id);
    }
    next->id_by_name[rec.name] = rec.id;
    db.record = std::move(rec);
    next->by_id.emplace(db.record.id, std::move(db));
  }
  for (auto& t : tokens) next->tokens.emplace(t.id, std::move(t));
  for (const auto& [id, db] : current->by_id) {
    auto it = next->by_id.find(id);
    if (it == next->by_id.end() || it->second.engine != db.engine) {
      spdlog::info("database '{}' ({}) is no longer served", db.record.name, id);
      // Watch streams end now, so they stop holding the engine and their clients reconnect.
      db.engine->Retire();
      retired_.push_back(db.engine);
    }
  }
  {
    MutexLock lock(snap_mu_);
    snap_ = std::move(next);
  }
  return first_error;
}

void Directory::ReapRetired() {
  for (auto it = retired_.begin(); it != retired_.end();) {
    if (it->use_count() == 1) {
      (*it)->Shutdown();
      it = retired_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace kvc::service
