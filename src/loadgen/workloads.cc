#include "loadgen/workloads.h"

#include <algorithm>
#include <charconv>

#include "codec/key_codec.h"
#include "codec/versionstamp.h"
#include "common/bytes.h"

namespace kvc::loadgen {

void Worker::Next() {
  const int64_t now = NowNs();
  if (now >= plan_->window_end() || plan_->is_stopping() || !conn_->usable()) {
    finished_->Done();
    return;
  }
  start_ns_ = now;
  switch (plan_->options.workload) {
    case Workload::kGet:
      DoGet();
      break;
    case Workload::kSet:
      DoSet();
      break;
    case Workload::kCas:
      DoCas();
      break;
    case Workload::kList:
      DoList();
      break;
    case Workload::kSum:
      DoSum();
      break;
    case Workload::kMixed:
      if (Random(10) == 0) {
        DoSet();
      } else {
        DoGet();
      }
      break;
    case Workload::kWatch:  // run by Watcher and WatchWriter
      finished_->Done();
      break;
  }
}

void Worker::Finish(Outcome outcome) {
  const int64_t end = NowNs();
  if (start_ns_ >= plan_->window_start()) {
    if (outcome != Outcome::kFailed) {
      stats_->latency_ns.push_back(static_cast<uint64_t>(end - start_ns_));
      stats_->last_done_ns = std::max(stats_->last_done_ns, end);
    }
    if (outcome == Outcome::kSuccess) ++stats_->ops;
    if (outcome == Outcome::kConflict) ++stats_->conflicts;
  }
  Next();
}

void Worker::DoGet() {
  const std::string& key = plan_->keys[Random(plan_->keys.size())];
  conn_->Send(plan_->MakeRequest(plan_->read_path, ReadOneBody(key)),
              [this, &key](Result<client::Response> r) {
                auto body = TakeBody(r, *plan_, stats_, "snapshot_read");
                if (!body) return Finish(Outcome::kFailed);
                auto ranges = DecodeRead(*body, 1, stats_);
                if (!ranges) return Finish(Outcome::kFailed);
                if ((*ranges)[0].empty()) {
                  ++stats_->misses;
                  if (plan_->expect_present) {
                    stats_->errors.Add("not_found", "get: preloaded key " +
                                                        codec::KeyToString(key) + " was not found");
                    return Finish(Outcome::kFailed);
                  }
                }
                Finish(Outcome::kSuccess);
              });
}

void Worker::DoSet() {
  const std::string& key = plan_->keys[Random(plan_->keys.size())];
  conn_->Send(plan_->MakeRequest(plan_->write_path, SetBody(key, plan_->value)),
              [this](Result<client::Response> r) {
                auto body = TakeBody(r, *plan_, stats_, "atomic_write");
                if (!body) return Finish(Outcome::kFailed);
                auto result = DecodeWrite(*body, stats_);
                if (!result) return Finish(Outcome::kFailed);
                if (result->status != codec::WriteStatus::kSuccess) {
                  stats_->errors.Add("write_status", "set: a write without checks failed a check");
                  return Finish(Outcome::kFailed);
                }
                Finish(Outcome::kSuccess);
              });
}

// Check-and-set: read the key, then write it only if its versionstamp is unchanged.
void Worker::DoCas() {
  const std::string& key = plan_->hot_keys[Random(plan_->hot_keys.size())];
  conn_->Send(
      plan_->MakeRequest(plan_->read_path, ReadOneBody(key)),
      [this, &key](Result<client::Response> r) {
        auto body = TakeBody(r, *plan_, stats_, "snapshot_read");
        if (!body) return Finish(Outcome::kFailed);
        auto ranges = DecodeRead(*body, 1, stats_);
        if (!ranges) return Finish(Outcome::kFailed);
        AtomicWrite w;
        std::string stamp;  // empty: the key must not exist
        if (!(*ranges)[0].empty()) {
          stamp = codec::VersionstampToBytes(codec::VersionToVersionstamp((*ranges)[0][0].version));
        }
        w.checks.push_back(Check{key, std::move(stamp)});
        w.mutations.push_back(
            Mutation{key, MutationType::kSet,
                     KvValue{codec::EncodeV8String("cas " + std::to_string(++counter_)),
                             ValueEncoding::kV8}});
        conn_->Send(plan_->MakeRequest(plan_->write_path, codec::EncodeAtomicWriteRequest(w)),
                    [this](Result<client::Response> wr) {
                      auto wbody = TakeBody(wr, *plan_, stats_, "atomic_write");
                      if (!wbody) return Finish(Outcome::kFailed);
                      auto result = DecodeWrite(*wbody, stats_);
                      if (!result) return Finish(Outcome::kFailed);
                      Finish(result->status == codec::WriteStatus::kSuccess ? Outcome::kSuccess
                                                                            : Outcome::kConflict);
                    });
      });
}

void Worker::DoList() {
  const size_t start = Random(plan_->keys.size() - kListSize + 1);
  const ReadRange range{plan_->keys[start], plan_->keys_end, static_cast<int32_t>(kListSize),
                        false};
  conn_->Send(plan_->MakeRequest(plan_->read_path, codec::EncodeSnapshotReadRequest({range})),
              [this](Result<client::Response> r) {
                auto body = TakeBody(r, *plan_, stats_, "snapshot_read");
                if (!body) return Finish(Outcome::kFailed);
                auto ranges = DecodeRead(*body, 1, stats_);
                if (!ranges) return Finish(Outcome::kFailed);
                const size_t n = (*ranges)[0].size();
                if (n != static_cast<size_t>(kListSize)) {
                  ++stats_->misses;
                  if (plan_->expect_present) {
                    stats_->errors.Add("short_list",
                                       "list: " + std::to_string(n) + " entries instead of 100");
                    return Finish(Outcome::kFailed);
                  }
                }
                Finish(Outcome::kSuccess);
              });
}

void Worker::DoSum() {
  AtomicWrite w;
  w.mutations.push_back(Mutation{plan_->counter_key, MutationType::kSum,
                                 KvValue{EncodeLe64(1), ValueEncoding::kLe64}});
  conn_->Send(plan_->MakeRequest(plan_->write_path, codec::EncodeAtomicWriteRequest(w)),
              [this](Result<client::Response> r) {
                // Without an answer the sum may or may not have been applied.
                if (!r.ok()) ++stats_->sums_unknown;
                auto body = TakeBody(r, *plan_, stats_, "atomic_write");
                if (!body) return Finish(Outcome::kFailed);
                auto result = DecodeWrite(*body, stats_);
                if (!result) {
                  ++stats_->sums_unknown;  // a 200 we cannot read may still be a success
                  return Finish(Outcome::kFailed);
                }
                if (result->status != codec::WriteStatus::kSuccess) {
                  stats_->errors.Add("write_status", "sum: a write without checks failed a check");
                  return Finish(Outcome::kFailed);
                }
                ++stats_->sums_ok;
                Finish(Outcome::kSuccess);
              });
}

void Watcher::Start() {
  client::StreamHandlers h;
  h.on_head = [this](const client::Response& head) { status_ = head.status; };
  h.on_data = [this](std::string_view data) { OnData(data); };
  h.on_end = [this](const Status& s) { OnEnd(s); };
  conn_->SendStreaming(plan_->MakeRequest(plan_->watch_path, codec::EncodeWatchRequest({*key_})),
                       std::move(h));
}

void Watcher::OnData(std::string_view data) {
  if (failed_) return;
  if (status_ != 200) {  // an error answer: keep its text
    if (error_body_.size() < ErrorCounts::kMaxTextBytes) error_body_.append(data);
    return;
  }
  frames_.Append(data);
  while (true) {
    Result<std::optional<std::string_view>> frame = frames_.Next();
    if (!frame.ok()) return Fail("decode", "watch: " + frame.status().message());
    if (!frame->has_value()) return;
    if (!(*frame)->empty()) OnFrame(**frame);  // empty: a keep-alive
    if (failed_) return;
  }
}

void Watcher::OnFrame(std::string_view payload) {
  const int64_t now = NowNs();
  auto frame = codec::DecodeWatchOutput(payload);
  if (!frame.ok()) return Fail("decode", "watch: " + frame.status().message());
  if (frame->status != codec::ReadStatus::kSuccess) {
    return Fail("read_status",
                "watch: frame status " + std::to_string(static_cast<int>(frame->status)));
  }
  if (frame->keys.size() != 1) {
    return Fail("decode", "watch: a frame with " + std::to_string(frame->keys.size()) +
                              " keys for 1 watched key");
  }
  const codec::WatchKeyResult& k = frame->keys[0];
  if (!opened_) {
    if (!k.changed) return Fail("decode", "watch: the first frame marks the key unchanged");
    opened_ = true;
    ++stats_->watchers_open;
    version_ = k.entry ? k.entry->version : 0;
    ready_->Done();
    return;
  }
  if (!k.changed || !k.entry || k.entry->version == version_) return;  // nothing new
  version_ = k.entry->version;
  auto text = codec::ParseV8String(k.entry->value);
  int64_t sent_ns = 0;
  if (!text.ok() ||
      std::from_chars(text->data(), text->data() + text->size(), sent_ns).ec != std::errc()) {
    return Fail("decode", "watch: the watched value is not a timestamp written by this run");
  }
  if (sent_ns >= plan_->window_start() && sent_ns < plan_->window_end()) {
    ++stats_->frames;
    ++stats_->ops;
    stats_->latency_ns.push_back(static_cast<uint64_t>(std::max<int64_t>(now - sent_ns, 0)));
    stats_->last_done_ns = std::max(stats_->last_done_ns, now);
  }
}

void Watcher::Fail(std::string_view kind, std::string_view text) {
  failed_ = true;
  stats_->errors.Add(kind, text);
}

void Watcher::OnEnd(const Status& s) {
  if (!opened_) ready_->Done();
  if (!failed_ && !plan_->is_stopping()) {
    failed_ = true;
    if (status_ != 0 && status_ != 200) {
      const std::string code = std::to_string(status_);
      stats_->errors.Add("http_" + code, "watch: HTTP " + code + ": " + error_body_);
    } else if (!s.ok()) {
      stats_->errors.Add("transport", "watch: " + s.message());
    } else {
      stats_->errors.Add("transport", "watch: the server ended the stream");
    }
  }
  ended_->Done();
}

void WatchWriter::Start() {
  next_tick_ = Clock::now();
  Tick();
}

void WatchWriter::Tick() {
  if (NowNs() >= plan_->window_end() || plan_->is_stopping() || !conn_->usable()) {
    ticking_ = false;
    MaybeDone();
    return;
  }
  if (in_flight_ < max_in_flight_) Write();
  next_tick_ += std::chrono::milliseconds(plan_->options.watch_interval_ms);
  next_tick_ = std::max(next_tick_, Clock::now());  // skip ticks we are late for
  timer_.expires_at(next_tick_);
  timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec) {
      ticking_ = false;
      MaybeDone();
      return;
    }
    Tick();
  });
}

void WatchWriter::Write() {
  const std::string& key = plan_->watch_keys[next_key_++ % plan_->watch_keys.size()];
  const std::string value = codec::EncodeV8String(std::to_string(NowNs()));
  ++in_flight_;
  conn_->Send(plan_->MakeRequest(plan_->write_path, SetBody(key, value)),
              [this](Result<client::Response> r) {
                --in_flight_;
                auto body = TakeBody(r, *plan_, stats_, "atomic_write");
                if (body) {
                  auto result = DecodeWrite(*body, stats_);
                  if (result && result->status == codec::WriteStatus::kSuccess) {
                    ++stats_->writes;
                  } else if (result) {
                    stats_->errors.Add("write_status", "watch writer: a write failed a check");
                  }
                }
                MaybeDone();
              });
}

void WatchWriter::MaybeDone() {
  if (!ticking_ && in_flight_ == 0 && !reported_) {
    reported_ = true;
    done_->Done();
  }
}

}  // namespace kvc::loadgen
