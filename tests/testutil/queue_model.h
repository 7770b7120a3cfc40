// QueueModel: an independent, in-memory model of queue delivery (docs/queues.md, queue/queue.h),
// the oracle of the differential queue test. Written from the documented semantics, sharing
// no code with queue/ or storage/ on purpose:
//   - ready messages are delivered in (due ts, id) order, each delivery with a new lease until
//     now + visibility; `attempts` counts deliveries;
//   - only the current lease of a leased message settles it, and only before its deadline (a
//     lease expires at its deadline);
//   - ack removes; extend moves the deadline to now + visibility;
//   - nack and expiry consume the first backoff step: due again at now + step (a nack's delay
//     replaces the step); with no step left the message is dead: the payload goes to every
//     keys_if_undelivered key and a dead letter records it;
//   - expired leases are settled (as failures) before anything else happens at a given time.
// Time is what the caller says it is; every operation first applies the expiries due by then.
//
// Thread-safety: none (one test thread).
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace kvc::testutil {

class QueueModel {
 public:
  struct Msg {
    std::string id;
    std::string payload;
    std::deque<uint32_t> steps;  // backoff steps left
    std::vector<std::string> keys;
    int64_t ts = 0;  // due time while ready
    int32_t attempts = 0;
    bool leased = false;
    int64_t deadline = 0;  // while leased
    std::string lease;     // current lease token while leased
    std::string last_error;
  };
  struct Dead {
    std::string id;
    std::string payload;
    std::vector<std::string> keys;
    int32_t attempts = 0;
    std::string last_error;
    int64_t dead_at = 0;
  };
  // A delivery the model expects (the lease token is the engine's; see Leased()).
  struct Expected {
    std::string id;
    std::string payload;
    int32_t attempt = 0;
    int64_t lease_expires = 0;
  };
  enum class Outcome { kOk, kStale, kDead };
  struct Counts {
    int64_t ready = 0, delayed = 0, leased = 0, dead = 0;
  };

  static constexpr const char* kExpiredError = "the lease expired before a settle";
  static constexpr const char* kNackDefaultError = "nacked";

  explicit QueueModel(std::vector<uint32_t> default_schedule)
      : default_schedule_(std::move(default_schedule)) {}

  void Enqueue(const std::string& id, const std::string& payload, int64_t ts,
               const std::vector<uint32_t>& steps, const std::vector<std::string>& keys) {
    Msg m;
    m.id = id;
    m.payload = payload;
    m.steps.assign(steps.begin(), steps.end());
    m.keys = keys;
    m.ts = ts;
    msgs_[id] = std::move(m);
  }

  // Applies the expiries due at `now`: every leased message with deadline <= now fails.
  void Tick(int64_t now) {
    std::vector<std::string> expired;
    for (auto& [id, m] : msgs_) {
      if (m.leased && m.deadline <= now) expired.push_back(id);
    }
    // Deadline order, as a sweep would meet them (only the order of kv writes depends on it).
    std::sort(expired.begin(), expired.end(), [&](const std::string& a, const std::string& b) {
      return std::tie(msgs_[a].deadline, a) < std::tie(msgs_[b].deadline, b);
    });
    for (const std::string& id : expired) Fail(id, now, std::nullopt, kExpiredError);
  }

  // The messages a pull of at most `max` gets at `now`, leased until now + visibility. Call
  // SetLease for each with the engine's token.
  std::vector<Expected> Pull(int64_t now, size_t max, int64_t visibility) {
    Tick(now);
    std::vector<Msg*> due;
    for (auto& [id, m] : msgs_) {
      if (!m.leased && m.ts <= now) due.push_back(&m);
    }
    std::sort(due.begin(), due.end(), [](const Msg* a, const Msg* b) {
      return std::tie(a->ts, a->id) < std::tie(b->ts, b->id);
    });
    std::vector<Expected> out;
    for (Msg* m : due) {
      if (out.size() == max) break;
      m->attempts += 1;
      m->leased = true;
      m->deadline = now + visibility;
      m->lease.clear();
      out.push_back(Expected{m->id, m->payload, m->attempts, m->deadline});
    }
    return out;
  }
  void SetLease(const std::string& id, const std::string& lease) { msgs_.at(id).lease = lease; }

  Outcome Ack(int64_t now, const std::string& lease) {
    Tick(now);
    Msg* m = Holder(lease);
    if (!m) return Outcome::kStale;
    msgs_.erase(m->id);
    return Outcome::kOk;
  }
  Outcome Nack(int64_t now, const std::string& lease, std::optional<int64_t> delay,
               const std::string& error) {
    Tick(now);
    Msg* m = Holder(lease);
    if (!m) return Outcome::kStale;
    return Fail(m->id, now, delay, error.empty() ? kNackDefaultError : error);
  }
  // On kOk, *expires is the new deadline.
  Outcome Extend(int64_t now, const std::string& lease, int64_t visibility, int64_t* expires) {
    Tick(now);
    Msg* m = Holder(lease);
    if (!m) return Outcome::kStale;
    m->deadline = now + visibility;
    *expires = m->deadline;
    return Outcome::kOk;
  }

  // Dead letters back to ready (due now, the default schedule, attempts from 0).
  int64_t RequeueDead(int64_t now, const std::vector<std::string>& ids) {
    Tick(now);
    int64_t n = 0;
    for (const std::string& id : ids) {
      auto it = dead_.find(id);
      if (it == dead_.end()) continue;
      std::vector<uint32_t> steps = default_schedule_;
      Enqueue(id, it->second.payload, now, steps, it->second.keys);
      dead_.erase(it);
      ++n;
    }
    return n;
  }
  int64_t PurgeDead(int64_t now, const std::vector<std::string>& ids) {
    Tick(now);
    int64_t n = 0;
    for (const std::string& id : ids) n += static_cast<int64_t>(dead_.erase(id));
    return n;
  }

  Counts CountsAt(int64_t now) {
    Tick(now);
    Counts c;
    for (const auto& [id, m] : msgs_) {
      if (m.leased) {
        ++c.leased;
      } else if (m.ts <= now) {
        ++c.ready;
      } else {
        ++c.delayed;
      }
    }
    c.dead = static_cast<int64_t>(dead_.size());
    return c;
  }

  // The earliest future time something happens by itself (a due time or a deadline), if any.
  std::optional<int64_t> NextEvent(int64_t now) const {
    std::optional<int64_t> t;
    for (const auto& [id, m] : msgs_) {
      const int64_t at = m.leased ? m.deadline : m.ts;
      if (at > now && (!t || at < *t)) t = at;
    }
    return t;
  }

  // Leased messages' current tokens (those the engine handed out and the model learned).
  std::vector<std::string> Leases() const {
    std::vector<std::string> out;
    for (const auto& [id, m] : msgs_) {
      if (m.leased && !m.lease.empty()) out.push_back(m.lease);
    }
    return out;
  }

  const std::map<std::string, Msg>& msgs() const { return msgs_; }
  const std::map<std::string, Dead>& dead() const { return dead_; }
  // keys_if_undelivered written so far: key -> payload.
  const std::map<std::string, std::string>& kv() const { return kv_; }
  int64_t undelivered() const { return static_cast<int64_t>(msgs_.size()); }
  int64_t dead_total() const { return dead_total_; }

 private:
  Msg* Holder(const std::string& lease) {
    for (auto& [id, m] : msgs_) {
      if (m.leased && !m.lease.empty() && m.lease == lease) return &m;
    }
    return nullptr;
  }

  Outcome Fail(const std::string& id, int64_t now, std::optional<int64_t> delay,
               const std::string& error) {
    Msg& m = msgs_.at(id);
    if (!m.steps.empty()) {
      const uint32_t step = m.steps.front();
      m.steps.pop_front();
      m.ts = now + (delay ? *delay : static_cast<int64_t>(step));
      m.leased = false;
      m.lease.clear();
      m.last_error = error;
      return Outcome::kOk;
    }
    for (const std::string& k : m.keys) kv_[k] = m.payload;
    dead_[id] = Dead{id, m.payload, m.keys, m.attempts, error, now};
    ++dead_total_;
    msgs_.erase(id);
    return Outcome::kDead;
  }

  std::vector<uint32_t> default_schedule_;
  std::map<std::string, Msg> msgs_;  // by id
  std::map<std::string, Dead> dead_;
  std::map<std::string, std::string> kv_;
  int64_t dead_total_ = 0;
};

}  // namespace kvc::testutil
