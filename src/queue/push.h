// Push delivery: a database's queue messages POSTed to a configured URL as Standard Webhooks
// (https://www.standardwebhooks.com, spec/standard-webhooks.md of standard-webhooks/
// standard-webhooks, version 1.0.0).
//
// Each delivery becomes one POST of the body the renderer makes (JSON, Content-Type
// application/json) with the headers
//   webhook-id:        the message id: the same for every attempt of one message, so a receiver
//                      can use it as its idempotency key (the spec's "unique identifier ... remains
//                      the same no matter how many times a webhook that has failed is retried");
//                      the attempt number is in the body;
//   webhook-timestamp: Unix seconds of this attempt;
//   webhook-signature: "v1,<base64 HMAC-SHA256(key, "{id}.{timestamp}.{body}")>" for each
//                      configured secret (two during a rotation), space-separated; a secret is
//                      "whsec_<base64 of the key bytes>".
// Outcome: 2xx acks. Anything else nacks with an error text kept with the message (a dead
// letter shows the last one): "HTTP 500", "timeout after 30000 ms", "request failed: ...".
// 429 and 503 with a Retry-After (seconds or an HTTP-date) nack with that delay, bounded by
// max_retry_after_ms. 410 Gone nacks like any failure: the spec suggests disabling the
// endpoint, which is the operator's call here (the messages retry, then dead-letter). Redirects
// are not followed (a 3xx is a failure, as the spec recommends).
//
// SSRF guard: every address libcurl is about to connect to (after its own DNS resolution, so a
// name that re-resolves to an internal address is caught: the check is on the connected
// address, not on the name) is classified; loopback, private, link-local, CGNAT, unspecified,
// multicast and reserved addresses (also inside IPv4-mapped, IPv4-compatible, NAT64 and 6to4
// IPv6 addresses) are refused unless they match `allow_hosts`. A refused destination nacks with
// "destination address X is not allowed (private or loopback; see --queue-push-allow)". No
// proxy is used (environment proxies are ignored).
//
// Ownership: PushDispatcher owns its thread, a libcurl multi handle and up to `concurrency` easy
// handles (their connections are reused). It holds no reference to a Queue: it settles through
// the injected SettleFn. The Queue holds the dispatcher (a ConsumerSink) by shared_ptr.
//
// Concurrency protocol:
// - Deliver and Closed run on the engine's writer thread and never block: Deliver appends to a
//   mutex-guarded pending list and wakes the dispatcher thread (curl_multi_wakeup).
// - The dispatcher thread alone renders bodies, signs, runs the transfers (curl_multi, at most
//   `concurrency` in flight), and calls SettleFn with the outcome (acks finished together are
//   one request). SettleFn must not block (Queue::Settle does not); its callback runs wherever
//   the Queue runs it (the writer thread) and touches only atomic counters.
// - A delivery whose lease already ran out while it waited is dropped (counted as expired):
//   the message is someone else's again. Subscribe with consumer_options() (max_in_flight =
//   concurrency) so deliveries do not wait.
// - Closed: pending deliveries are dropped (their leases expire), no more are taken; transfers
//   in flight finish and are settled (the settle may then fail; the leases expire anyway).
// - Stop (and the destructor): the thread ends; transfers in flight are abandoned (their
//   leases expire). REQUIRES: the owner calls Stop on a thread other than the writer thread
//   before dropping its reference, since the Queue may drop the last reference on the writer
//   thread while the dispatcher thread is inside SettleFn.
// Thread-safety: Deliver, Closed, Stop and the accessors are thread-safe.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/mutex.h"
#include "common/status.h"
#include "queue/queue.h"

namespace kvc::queue {

struct PushOptions {
  std::string url;                   // http(s)://host[:port]/path; no user name or password
  std::vector<std::string> secrets;  // 1 or 2, "whsec_<base64>"; all sign every request
  size_t concurrency = 4;            // requests in flight
  int64_t timeout_ms = 30000;        // whole request, connect included
  int64_t visibility_ms = 60000;     // lease per delivery; > timeout_ms
  // Literal IP addresses or CIDRs (127.0.0.1, 10.0.0.0/8, fd00::/8) reachable even if private,
  // loopback or otherwise refused. Host names are not accepted (they could re-resolve).
  std::vector<std::string> allow_hosts;
  std::string format = "json";               // "json" | "v8": the value in the body
  int64_t max_retry_after_ms = 3600 * 1000;  // bound on a receiver's Retry-After
};

// Bounds ValidatePushOptions enforces.
inline constexpr size_t kMaxPushConcurrency = 1000;
inline constexpr int64_t kMinPushTimeoutMs = 100;
inline constexpr int64_t kMaxPushTimeoutMs = 10 * 60 * 1000;
inline constexpr int64_t kMaxPushVisibilityMs = 12 * 3600 * 1000;
inline constexpr size_t kMinWebhookKeyBytes = 24;  // the spec: at least 24 bytes ...
inline constexpr size_t kMaxWebhookKeyBytes = 64;  // ... and at most 512 bits

// Returns OK, or InvalidArgument naming the first bad field, e.g. "push secret 2 must start with
// 'whsec_'".
Status ValidatePushOptions(const PushOptions& options);

// The key bytes of "whsec_<base64>" (standard alphabet, padded). Errors: InvalidArgument.
Result<std::string> DecodeWebhookSecret(std::string_view secret);
// "v1,<base64 of HMAC-SHA256(key, id.timestamp_s.body)>".
std::string WebhookSignature(std::string_view key, std::string_view id, int64_t timestamp_s,
                             std::string_view body);
// The webhook-signature header: one WebhookSignature per key, space-separated, in order.
std::string WebhookSignatureHeader(const std::vector<std::string>& keys, std::string_view id,
                                   int64_t timestamp_s, std::string_view body);

// An IPv4 or IPv6 address. IPv4 uses bytes[0..3].
struct IpAddress {
  bool v6 = false;
  std::array<uint8_t, 16> bytes{};
  bool operator==(const IpAddress& other) const = default;
};
// A literal address ("10.1.2.3", "::1", "::ffff:10.1.2.3"). Errors: InvalidArgument.
Result<IpAddress> ParseIpAddress(std::string_view text);
std::string FormatIpAddress(const IpAddress& address);
// ::ffff:a.b.c.d as a.b.c.d; any other address as is.
IpAddress UnmapIpv4(const IpAddress& address);

// An address with a prefix length ("10.0.0.0/8"; a bare address is a full-length prefix).
struct IpNetwork {
  IpAddress base;
  int prefix_len = 0;
  bool Contains(const IpAddress& address) const;  // same family only
};
// Errors: InvalidArgument.
Result<IpNetwork> ParseIpNetwork(std::string_view text);

enum class AddressClass {
  kPublic,
  kLoopback,     // 127/8, ::1
  kPrivate,      // 10/8, 172.16/12, 192.168/16, fc00::/7, fec0::/10
  kLinkLocal,    // 169.254/16, fe80::/10
  kSharedCgnat,  // 100.64/10
  kUnspecified,  // 0/8, ::
  kMulticast,    // 224/4, ff00::/8
  kReserved,     // 240/4 (with 255.255.255.255), 192.0.0/24, 198.18/15
};
const char* AddressClassName(AddressClass c);
// IPv6 addresses that embed an IPv4 one (IPv4-mapped ::ffff:0:0/96, IPv4-compatible ::/96,
// NAT64 64:ff9b::/96, 6to4 2002::/16) are classified by the embedded address.
AddressClass ClassifyAddress(const IpAddress& address);
// True if `address` is public or inside one of `allow` (compared as is and unmapped).
bool DestinationAllowed(const IpAddress& address, const std::vector<IpNetwork>& allow);

// The delay a Retry-After value asks for, in ms from now_ms: delta-seconds or an HTTP-date (a
// date in the past: 0). nullopt if it is neither.
std::optional<int64_t> ParseRetryAfterMs(std::string_view value, int64_t now_ms);

// What an HTTP answer means for the message.
struct PushOutcome {
  bool ack = false;
  std::optional<int64_t> delay_ms;  // nack: instead of the backoff step
  std::string error;                // nack: why
};
// 2xx: ack; otherwise a nack "HTTP <status>", with Retry-After honoured on 429 and 503 (bounded
// by max_retry_after_ms).
PushOutcome OutcomeOfHttpStatus(long status, std::optional<std::string_view> retry_after,
                                int64_t now_ms, int64_t max_retry_after_ms);

// The body of one delivery: {"type":"kvconnect.queue.message","timestamp":RFC3339,"data":
// {"id":ID,"attempt":N,"value":VALUE}} with `value_json` (a KvValueJSON or {"type":"v8",...}
// object, docs/queues.md) inserted as is. A renderer can wrap its value with it.
std::string PushBody(const Delivery& delivery, std::string_view value_json, int64_t timestamp_ms);

// One POST in flight, and the dispatcher's libcurl handles (defined in push.cc).
struct PushTransfer;
struct PushCurl;

// Posts deliveries to a URL (see the file comment).
class PushDispatcher : public ConsumerSink {
 public:
  // Settles leases: Queue::Settle, or a fake in tests. Must not block.
  using SettleFn = std::function<void(SettleRequest, Queue::SettleCallback)>;
  // The body of one delivery (JSON). An error nacks the delivery with its message.
  using RenderFn = std::function<Result<std::string>(const Delivery&)>;

  // Validates `options` (InvalidArgument), sets up libcurl (Internal on failure) and starts the
  // thread. REQUIRES: settle and render are callable.
  static Result<std::shared_ptr<PushDispatcher>> Start(PushOptions options, SettleFn settle,
                                                       RenderFn render,
                                                       const Clock* clock = SystemClock());
  ~PushDispatcher() override;
  PushDispatcher(const PushDispatcher&) = delete;
  PushDispatcher& operator=(const PushDispatcher&) = delete;

  // ConsumerSink: called on the writer thread; never block.
  void Deliver(Delivery d) override;
  void Closed(const Status& why) override;

  // Ends the thread, abandoning transfers in flight; idempotent. REQUIRES: not called on the
  // dispatcher thread (so not from SettleFn or RenderFn).
  void Stop();

  // What to Subscribe with: max_in_flight = concurrency, visibility_ms.
  ConsumerOptions consumer_options() const;
  const PushOptions& options() const { return options_; }

  // Counters since Start, for /metrics.
  uint64_t posted() const { return counters_->posted.load(); }    // requests started
  uint64_t acked() const { return counters_->acked.load(); }      // 2xx, ack sent
  uint64_t failed() const { return counters_->failed.load(); }    // nack sent (refused too)
  uint64_t refused() const { return counters_->refused.load(); }  // destination not allowed
  uint64_t expired() const { return counters_->expired.load(); }  // lease over before posting
  uint64_t dropped() const { return counters_->dropped.load(); }  // after Closed or Stop
  // Settle requests the queue answered with an error (e.g. Unavailable after shutdown).
  uint64_t settle_errors() const { return counters_->settle_errors.load(); }
  size_t in_flight() const { return in_flight_.load(); }

 private:
  struct Counters {
    std::atomic<uint64_t> posted{0};
    std::atomic<uint64_t> acked{0};
    std::atomic<uint64_t> failed{0};
    std::atomic<uint64_t> refused{0};
    std::atomic<uint64_t> expired{0};
    std::atomic<uint64_t> dropped{0};
    std::atomic<uint64_t> settle_errors{0};
  };
  PushDispatcher(PushOptions options, SettleFn settle, RenderFn render, const Clock* clock);

  // Dispatcher thread only.
  void Run();
  void StartTransfer(Delivery d);
  void FinishTransfer(void* easy, int code);
  void Nack(const std::string& lease, std::optional<int64_t> delay_ms, std::string error);
  void FlushAcks();

  const PushOptions options_;
  const SettleFn settle_;
  const RenderFn render_;
  const Clock* const clock_;
  std::vector<std::string> keys_;  // decoded secrets
  std::vector<IpNetwork> allow_;   // parsed allow_hosts
  std::shared_ptr<Counters> counters_ = std::make_shared<Counters>();
  std::atomic<size_t> in_flight_{0};
  std::unique_ptr<PushCurl> curl_;  // the multi handle (wakeup is thread-safe), idle easy handles
  std::vector<std::string> acks_;   // dispatcher thread: leases to ack at the end of a round

  Mutex mu_;
  std::deque<Delivery> pending_ KVC_GUARDED_BY(mu_);
  bool closed_ KVC_GUARDED_BY(mu_) = false;
  bool stop_ KVC_GUARDED_BY(mu_) = false;

  Mutex join_mu_;  // serializes Stop
  std::thread thread_;
};

}  // namespace kvc::queue
