#include "loadgen/setup.h"

#include <boost/asio/post.hpp>
#include <future>

#include "codec/client_codec.h"
#include "codec/key_codec.h"
#include "common/bytes.h"

namespace kvc::loadgen {

namespace asio = boost::asio;

IoPool::IoPool(int threads) : exited_(threads) {
  for (int i = 0; i < threads; ++i) {
    contexts_.push_back(std::make_unique<asio::io_context>(1));
    guards_.emplace_back(contexts_.back()->get_executor());
  }
  for (int i = 0; i < threads; ++i) {
    threads_.emplace_back([this, i] {
      contexts_[static_cast<size_t>(i)]->run();
      exited_.Done();
    });
  }
}

void IoPool::Stop(std::chrono::milliseconds grace) {
  if (threads_.empty()) return;
  guards_.clear();
  exited_.WaitUntil(Clock::now() + grace);
  for (auto& c : contexts_) c->stop();
  for (auto& t : threads_) t.join();
  threads_.clear();
}

Status ConnectBlocking(asio::io_context& io, const std::shared_ptr<client::Connection>& conn,
                       std::chrono::milliseconds timeout) {
  auto promise = std::make_shared<std::promise<Status>>();
  auto future = promise->get_future();
  asio::post(io, [conn, promise] {
    conn->Connect([promise](Status s) { promise->set_value(std::move(s)); });
  });
  // The connection's own connect timeout fires first; this only guards against a stuck pool.
  if (future.wait_for(timeout * 2) != std::future_status::ready) {
    asio::post(io, [conn] { conn->Close(); });
    return Unavailable("connecting timed out");
  }
  return future.get();
}

Result<client::Response> CallBlocking(asio::io_context& io,
                                      const std::shared_ptr<client::Connection>& conn,
                                      client::Request request, std::chrono::milliseconds timeout) {
  auto promise = std::make_shared<std::promise<Result<client::Response>>>();
  auto future = promise->get_future();
  asio::post(io, [conn, promise, request = std::move(request)]() mutable {
    conn->Send(std::move(request),
               [promise](Result<client::Response> r) { promise->set_value(std::move(r)); });
  });
  if (future.wait_for(timeout) != std::future_status::ready) {
    asio::post(io, [conn] { conn->Close(); });
    return Unavailable("no answer within " + std::to_string(timeout.count()) + " ms");
  }
  return future.get();
}

Result<uint64_t> ReadCounter(asio::io_context& io, const std::shared_ptr<client::Connection>& conn,
                             const Plan& plan) {
  KVC_ASSIGN_OR_RETURN(
      client::Response r,
      CallBlocking(io, conn, plan.MakeRequest(plan.read_path, ReadOneBody(plan.counter_key)),
                   plan.options.timeout));
  if (r.status != 200) {
    return Internal("reading the sum counter: HTTP " + std::to_string(r.status) + ": " + r.body);
  }
  KVC_ASSIGN_OR_RETURN(codec::SnapshotReadResult read, codec::DecodeSnapshotReadOutput(r.body));
  if (read.ranges.size() != 1) return Internal("reading the sum counter: no range in the answer");
  if (read.ranges[0].empty()) return uint64_t{0};
  const Entry& e = read.ranges[0][0];
  if (e.encoding != ValueEncoding::kLe64) {
    return InvalidArgument("the sum counter " + codec::KeyToString(plan.counter_key) +
                           " holds a value that is not a KvU64");
  }
  return DecodeLe64(e.value);
}

std::vector<std::string> PreloadBatches(const std::vector<std::string>& keys,
                                        const std::string& value, const BenchOptions& o) {
  std::vector<std::string> batches;
  AtomicWrite w;
  size_t bytes = 0;
  for (const std::string& key : keys) {
    const size_t size = key.size() + value.size();
    if (!w.mutations.empty() &&
        (w.mutations.size() >= o.write_max_mutations || bytes + size > o.write_max_bytes)) {
      batches.push_back(codec::EncodeAtomicWriteRequest(w));
      w.mutations.clear();
      bytes = 0;
    }
    w.mutations.push_back(Mutation{key, MutationType::kSet, KvValue{value, ValueEncoding::kV8}});
    bytes += size;
  }
  if (!w.mutations.empty()) batches.push_back(codec::EncodeAtomicWriteRequest(w));
  return batches;
}

void PreloadLane::SendNext() {
  const size_t i = next_->fetch_add(1, std::memory_order_relaxed);
  if (i >= batches_->size() || state_->failed()) {
    done_->Done();
    return;
  }
  conn_->Send(plan_->MakeRequest(plan_->write_path, (*batches_)[i]),
              [this](Result<client::Response> r) {
                if (!r.ok()) {
                  state_->Fail(r.status());
                } else if (r->status != 200) {
                  state_->Fail(Internal("HTTP " + std::to_string(r->status) + ": " + r->body));
                } else {
                  auto w = codec::DecodeAtomicWriteOutput(r->body);
                  if (!w.ok()) {
                    state_->Fail(w.status());
                  } else if (w->status != codec::WriteStatus::kSuccess) {
                    state_->Fail(Internal("a preload write was not applied (status " +
                                          std::to_string(static_cast<int>(w->status)) + ")"));
                  }
                }
                SendNext();
              });
}

}  // namespace kvc::loadgen
