// The actors of the timed window (see plan.h for the threading model): Worker, the request loop
// of the get/set/cas/list/sum/mixed workloads; Watcher, one watch stream; WatchWriter, the
// writer that changes the watched keys.
//
// Ownership (the same for every actor here and PreloadLane in setup.h): an actor shares its
// connection; the plan, the stats and the countdowns belong to the driver, which stops the I/O
// threads before it destroys them or the actor.
// Thread-safety: none; an actor lives on its connection's io_context. Construct it anywhere,
// then post Start() there.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <utility>

#include "client/connection.h"
#include "codec/client_codec.h"
#include "common/status.h"
#include "loadgen/plan.h"

namespace kvc::loadgen {

// One request loop: starts its next operation as soon as the last one ended, until the window
// ends or its connection fails; then counts `finished` down.
class Worker {
 public:
  Worker(const Plan* plan, std::shared_ptr<client::Connection> conn, ThreadStats* stats,
         uint64_t seed, Countdown* finished)
      : plan_(plan), conn_(std::move(conn)), stats_(stats), rng_(seed), finished_(finished) {}

  void Start() { Next(); }

 private:
  enum class Outcome { kSuccess, kConflict, kFailed };

  uint64_t Random(uint64_t n) { return rng_() % n; }

  void Next();
  void Finish(Outcome outcome);
  void DoGet();
  void DoSet();
  void DoCas();
  void DoList();
  void DoSum();

  const Plan* plan_;
  std::shared_ptr<client::Connection> conn_;
  ThreadStats* stats_;
  std::mt19937_64 rng_;
  Countdown* finished_;
  int64_t start_ns_ = 0;
  uint64_t counter_ = 0;  // makes every cas value new
};

// One watch stream on one key. Counts each frame that reports a change made inside the window
// and its change-to-frame latency (the writer puts its submit time into the value). Counts
// `ready` down at its first frame (or when it fails before), `ended` when the stream ends.
class Watcher {
 public:
  Watcher(const Plan* plan, std::shared_ptr<client::Connection> conn, ThreadStats* stats,
          const std::string* key, Countdown* ready, Countdown* ended)
      : plan_(plan),
        conn_(std::move(conn)),
        stats_(stats),
        key_(key),
        ready_(ready),
        ended_(ended),
        frames_(plan->options.max_response_bytes) {}

  void Start();

  bool opened() const { return opened_; }
  bool failed() const { return failed_; }

 private:
  void OnData(std::string_view data);
  void OnFrame(std::string_view payload);
  void Fail(std::string_view kind, std::string_view text);
  void OnEnd(const Status& s);

  const Plan* plan_;
  std::shared_ptr<client::Connection> conn_;
  ThreadStats* stats_;
  const std::string* key_;
  Countdown* ready_;
  Countdown* ended_;
  int status_ = 0;
  codec::WatchFrameSplitter frames_;
  std::string error_body_;
  bool opened_ = false;  // the first frame arrived
  bool failed_ = false;  // an error was recorded; later data is ignored
  int64_t version_ = 0;  // of the last entry seen
};

// Sets one watched key after another, every watch_interval_ms, with its submit time (NowNs) as
// the value, from the start of the warm-up to the end of the window, with at most
// `max_in_flight` writes pending; then counts `done` down once they have been answered.
class WatchWriter {
 public:
  WatchWriter(const Plan* plan, std::shared_ptr<client::Connection> conn, ThreadStats* stats,
              boost::asio::io_context& io, int max_in_flight, Countdown* done)
      : plan_(plan),
        conn_(std::move(conn)),
        stats_(stats),
        timer_(io),
        max_in_flight_(max_in_flight),
        done_(done) {}

  void Start();

 private:
  void Tick();
  void Write();
  void MaybeDone();

  const Plan* plan_;
  std::shared_ptr<client::Connection> conn_;
  ThreadStats* stats_;
  boost::asio::steady_timer timer_;
  int max_in_flight_;
  Countdown* done_;
  Clock::time_point next_tick_;
  size_t next_key_ = 0;
  int in_flight_ = 0;
  bool ticking_ = true;
  bool reported_ = false;
};

}  // namespace kvc::loadgen
