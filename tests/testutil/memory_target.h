// MemoryTarget: a backup::Target kept in memory, with failures injected the way real targets
// fail: refusing requests (Unavailable), and storing an object only partly before the
// connection dies (a torn object that a later listing shows). SharedTarget hands one
// MemoryTarget to several owners (a ContinuousBackup takes its target by unique_ptr, and tests
// restart it).
//
// Thread-safety: all methods are thread-safe.
#pragma once

#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backup/target.h"
#include "common/mutex.h"

namespace kvc::testutil {

class MemoryTarget : public backup::Target {
 public:
  Status Put(const std::string& name, std::string_view data) override {
    MutexLock lock(mu_);
    ++puts_;
    if (fail_puts_ > 0) {
      --fail_puts_;
      return Unavailable("injected: the target refused the upload");
    }
    if (tear_puts_ > 0) {
      --tear_puts_;
      objects_[name] = std::string(data.substr(0, data.size() / 2));
      return Unavailable("injected: the connection died halfway through the upload");
    }
    objects_[name] = std::string(data);
    return Status::Ok();
  }
  Status PutFile(const std::string& name, const std::string& path) override {
    std::string data;
    KVC_RETURN_IF_ERROR(ReadFile(path, &data));
    return Put(name, data);
  }
  Result<std::string> Get(const std::string& name) override {
    MutexLock lock(mu_);
    auto it = objects_.find(name);
    if (it == objects_.end()) return NotFound("no object " + name);
    return it->second;
  }
  Status GetFile(const std::string& name, const std::string& path) override {
    KVC_ASSIGN_OR_RETURN(std::string data, Get(name));
    return WriteFile(path, data);
  }
  Result<std::vector<backup::ObjectInfo>> List(const std::string& prefix) override {
    MutexLock lock(mu_);
    if (fail_lists_ > 0) {
      --fail_lists_;
      return Unavailable("injected: listing refused");
    }
    std::vector<backup::ObjectInfo> out;
    for (auto it = objects_.lower_bound(prefix);
         it != objects_.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it) {
      out.push_back({it->first, static_cast<int64_t>(it->second.size())});
    }
    return out;
  }
  Status Delete(const std::string& name) override {
    MutexLock lock(mu_);
    objects_.erase(name);
    return Status::Ok();
  }
  std::string Describe() const override { return "memory://"; }

  // The next `n` uploads fail without storing anything.
  void FailPuts(int n) {
    MutexLock lock(mu_);
    fail_puts_ = n;
  }
  // The next `n` uploads store the first half of the object, then fail.
  void TearPuts(int n) {
    MutexLock lock(mu_);
    tear_puts_ = n;
  }
  void FailLists(int n) {
    MutexLock lock(mu_);
    fail_lists_ = n;
  }
  std::map<std::string, std::string> objects() const {
    MutexLock lock(mu_);
    return objects_;
  }
  int puts() const {
    MutexLock lock(mu_);
    return puts_;
  }

 private:
  static Status ReadFile(const std::string& path, std::string* out);
  static Status WriteFile(const std::string& path, const std::string& data);

  mutable Mutex mu_;
  std::map<std::string, std::string> objects_ KVC_GUARDED_BY(mu_);
  int fail_puts_ KVC_GUARDED_BY(mu_) = 0;
  int tear_puts_ KVC_GUARDED_BY(mu_) = 0;
  int fail_lists_ KVC_GUARDED_BY(mu_) = 0;
  int puts_ KVC_GUARDED_BY(mu_) = 0;
};

// A Target that forwards to a shared one.
class SharedTarget : public backup::Target {
 public:
  explicit SharedTarget(std::shared_ptr<backup::Target> t) : t_(std::move(t)) {}
  Status Put(const std::string& n, std::string_view d) override { return t_->Put(n, d); }
  Status PutFile(const std::string& n, const std::string& p) override { return t_->PutFile(n, p); }
  Result<std::string> Get(const std::string& n) override { return t_->Get(n); }
  Status GetFile(const std::string& n, const std::string& p) override { return t_->GetFile(n, p); }
  Result<std::vector<backup::ObjectInfo>> List(const std::string& p) override {
    return t_->List(p);
  }
  Status Delete(const std::string& n) override { return t_->Delete(n); }
  std::string Describe() const override { return t_->Describe(); }

 private:
  std::shared_ptr<backup::Target> t_;
};

inline Status MemoryTarget::ReadFile(const std::string& path, std::string* out) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return IoError("cannot read " + path);
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out->append(buf, n);
  std::fclose(f);
  return Status::Ok();
}

inline Status MemoryTarget::WriteFile(const std::string& path, const std::string& data) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return IoError("cannot write " + path);
  const bool ok = std::fwrite(data.data(), 1, data.size(), f) == data.size();
  std::fclose(f);
  return ok ? Status::Ok() : IoError("cannot write " + path);
}

}  // namespace kvc::testutil
