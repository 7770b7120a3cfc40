// Push delivery (queue/push.h) against real HTTP receivers on 127.0.0.1: our small recording
// receiver (testutil/webhook_receiver.h) for outcomes, timeouts, concurrency and the SSRF guard,
// and a Node receiver that verifies signatures with the npm package standardwebhooks. A fake
// settle function stands in for the Queue and records every settle request.
#include "queue/push.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/mutex.h"
#include "common/random.h"
#include "testutil/closed_port.h"
#include "testutil/webhook_receiver.h"

namespace kvc::queue {
namespace {

using testutil::ReceivedRequest;
using testutil::ReceiverReply;
using testutil::WebhookReceiver;

constexpr char kSecret[] = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
constexpr char kSecret2[] = "whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
constexpr auto kWait = std::chrono::seconds(20);

// Records settle requests; answers each lease "ok".
class FakeSettle {
 public:
  PushDispatcher::SettleFn fn() {
    return [this](SettleRequest request, const Queue::SettleCallback& done) {
      std::vector<SettleResult> results;
      for (const std::string& lease : request.leases) results.push_back({lease, SettleStatus::kOk});
      {
        MutexLock lock(mu_);
        for (size_t i = 0; i < request.leases.size(); ++i) ++settled_;
        requests_.push_back(std::move(request));
      }
      cv_.NotifyAll();
      done(std::move(results));
    };
  }

  // Waits until `n` leases were settled; false on timeout.
  bool WaitFor(size_t n) {
    MutexLock lock(mu_);
    const auto deadline = std::chrono::steady_clock::now() + kWait;
    while (settled_ < n) {
      if (!cv_.WaitUntil(mu_, deadline) && settled_ < n) return false;
    }
    return true;
  }

  std::vector<SettleRequest> requests() const {
    MutexLock lock(mu_);
    return requests_;
  }
  // Settle requests of one kind, one entry per lease.
  std::vector<SettleRequest> PerLease(SettleKind kind) const {
    std::vector<SettleRequest> out;
    for (const SettleRequest& r : requests()) {
      if (r.kind != kind) continue;
      for (const std::string& lease : r.leases) {
        SettleRequest one = r;
        one.leases = {lease};
        out.push_back(std::move(one));
      }
    }
    return out;
  }

 private:
  mutable Mutex mu_;
  CondVar cv_;
  size_t settled_ KVC_GUARDED_BY(mu_) = 0;
  std::vector<SettleRequest> requests_ KVC_GUARDED_BY(mu_);
};

Result<std::string> Render(const Delivery& d) {
  return PushBody(d, R"({"type":"string","value":"hi"})", NowUnixMs());
}

Delivery MakeDelivery(int n) {
  Delivery d;
  d.id = NewUuidV4();
  d.lease = "lease-" + std::to_string(n);
  d.payload = "\xff\x0f\x22\x02hi";
  d.attempt = 1;
  d.lease_expires_ms = NowUnixMs() + 60000;
  return d;
}

PushOptions Options(const std::string& url) {
  PushOptions o;
  o.url = url;
  o.secrets = {kSecret};
  o.allow_hosts = {"127.0.0.1"};
  o.timeout_ms = 5000;
  o.visibility_ms = 30000;
  return o;
}

std::unique_ptr<WebhookReceiver> StartReceiver(WebhookReceiver::Handler handler) {
  auto r = WebhookReceiver::Start(std::move(handler));
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : nullptr;
}

std::shared_ptr<PushDispatcher> StartDispatcher(const PushOptions& options, FakeSettle& settle) {
  auto d = PushDispatcher::Start(options, settle.fn(), Render);
  EXPECT_TRUE(d.ok()) << d.status().ToString();
  return d.ok() ? std::move(d).value() : nullptr;
}

TEST(PushDispatcherTest, AcksOn2xxWithStandardWebhookHeaders) {
  auto receiver = StartReceiver([](const ReceivedRequest&) { return ReceiverReply{204}; });
  ASSERT_TRUE(receiver);
  FakeSettle settle;
  PushOptions options = Options(receiver->url());
  options.secrets = {kSecret, kSecret2};
  auto dispatcher = StartDispatcher(options, settle);
  ASSERT_TRUE(dispatcher);
  std::vector<Delivery> sent;
  for (int i = 0; i < 3; ++i) sent.push_back(MakeDelivery(i));
  const int64_t before_s = NowUnixMs() / 1000;
  for (const Delivery& d : sent) dispatcher->Deliver(d);
  ASSERT_TRUE(settle.WaitFor(3));
  const int64_t after_s = NowUnixMs() / 1000;

  auto acks = settle.PerLease(SettleKind::kAck);
  ASSERT_EQ(acks.size(), 3u);
  EXPECT_TRUE(settle.PerLease(SettleKind::kNack).empty());
  EXPECT_EQ(dispatcher->posted(), 3u);
  EXPECT_EQ(dispatcher->acked(), 3u);
  EXPECT_EQ(dispatcher->failed(), 0u);

  auto keys =
      std::vector<std::string>{*DecodeWebhookSecret(kSecret), *DecodeWebhookSecret(kSecret2)};
  const auto requests = receiver->requests();
  ASSERT_EQ(requests.size(), 3u);
  for (const ReceivedRequest& r : requests) {
    EXPECT_EQ(r.method, "POST");
    EXPECT_EQ(r.target, "/hook");
    EXPECT_EQ(r.headers.at("content-type"), "application/json");
    const std::string& id = r.headers.at("webhook-id");
    bool known = false;
    for (const Delivery& d : sent) known = known || d.id == id;
    EXPECT_TRUE(known) << id;
    EXPECT_NE(r.body.find("\"id\":\"" + id + "\""), std::string::npos) << r.body;
    const int64_t ts = std::stoll(r.headers.at("webhook-timestamp"));
    EXPECT_GE(ts, before_s);
    EXPECT_LE(ts, after_s);
    // Both secrets sign; the Node test below verifies with an independent implementation.
    EXPECT_EQ(r.headers.at("webhook-signature"), WebhookSignatureHeader(keys, id, ts, r.body));
  }
}

TEST(PushDispatcherTest, NacksOtherStatusesAndDoesNotFollowRedirects) {
  std::atomic<int> n{0};
  auto receiver = StartReceiver([&n](const ReceivedRequest&) {
    if (n++ == 0) return ReceiverReply{500};
    return ReceiverReply{302, {{"Location", "http://127.0.0.1:1/elsewhere"}}};
  });
  ASSERT_TRUE(receiver);
  FakeSettle settle;
  PushOptions options = Options(receiver->url());
  options.concurrency = 1;  // in order: the 500, then the 302
  auto dispatcher = StartDispatcher(options, settle);
  ASSERT_TRUE(dispatcher);
  dispatcher->Deliver(MakeDelivery(1));
  dispatcher->Deliver(MakeDelivery(2));
  ASSERT_TRUE(settle.WaitFor(2));
  auto nacks = settle.PerLease(SettleKind::kNack);
  ASSERT_EQ(nacks.size(), 2u);
  EXPECT_EQ(nacks[0].leases[0], "lease-1");
  EXPECT_EQ(nacks[0].error, "HTTP 500");
  EXPECT_FALSE(nacks[0].delay_ms.has_value());
  EXPECT_EQ(nacks[1].leases[0], "lease-2");
  EXPECT_EQ(nacks[1].error, "HTTP 302");
  EXPECT_EQ(receiver->request_count(), 2u);
  EXPECT_EQ(dispatcher->failed(), 2u);
}

TEST(PushDispatcherTest, RetryAfterOn503BecomesTheNackDelay) {
  auto receiver = StartReceiver([](const ReceivedRequest&) {
    return ReceiverReply{503, {{"Retry-After", "2"}}};
  });
  ASSERT_TRUE(receiver);
  FakeSettle settle;
  auto dispatcher = StartDispatcher(Options(receiver->url()), settle);
  ASSERT_TRUE(dispatcher);
  dispatcher->Deliver(MakeDelivery(1));
  ASSERT_TRUE(settle.WaitFor(1));
  auto nacks = settle.PerLease(SettleKind::kNack);
  ASSERT_EQ(nacks.size(), 1u);
  EXPECT_EQ(nacks[0].error, "HTTP 503");
  EXPECT_EQ(nacks[0].delay_ms, 2000);
}

TEST(PushDispatcherTest, SlowReceiverTimesOut) {
  auto receiver = StartReceiver([](const ReceivedRequest&) {
    return ReceiverReply{204, {}, 5000};
  });
  ASSERT_TRUE(receiver);
  FakeSettle settle;
  PushOptions options = Options(receiver->url());
  options.timeout_ms = 300;
  options.visibility_ms = 1000;
  auto dispatcher = StartDispatcher(options, settle);
  ASSERT_TRUE(dispatcher);
  const auto start = std::chrono::steady_clock::now();
  dispatcher->Deliver(MakeDelivery(1));
  ASSERT_TRUE(settle.WaitFor(1));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(4));
  auto nacks = settle.PerLease(SettleKind::kNack);
  ASSERT_EQ(nacks.size(), 1u);
  EXPECT_EQ(nacks[0].error, "timeout after 300 ms");
  EXPECT_EQ(receiver->request_count(), 1u);
}

TEST(PushDispatcherTest, ConcurrencyLimitIsRespected) {
  auto receiver = StartReceiver([](const ReceivedRequest&) { return ReceiverReply{200, {}, 400}; });
  ASSERT_TRUE(receiver);
  FakeSettle settle;
  PushOptions options = Options(receiver->url());
  options.concurrency = 3;
  auto dispatcher = StartDispatcher(options, settle);
  ASSERT_TRUE(dispatcher);
  EXPECT_EQ(dispatcher->consumer_options().max_in_flight, 3u);
  EXPECT_EQ(dispatcher->consumer_options().visibility_ms, 30000);
  for (int i = 0; i < 10; ++i) dispatcher->Deliver(MakeDelivery(i));
  ASSERT_TRUE(settle.WaitFor(10));
  EXPECT_EQ(settle.PerLease(SettleKind::kAck).size(), 10u);
  EXPECT_EQ(receiver->request_count(), 10u);
  EXPECT_EQ(receiver->max_concurrent(), 3);
  EXPECT_EQ(dispatcher->in_flight(), 0u);
}

TEST(PushDispatcherTest, LoopbackIsRefusedWithoutAllowList) {
  auto receiver = StartReceiver([](const ReceivedRequest&) { return ReceiverReply{204}; });
  ASSERT_TRUE(receiver);
  FakeSettle settle;
  PushOptions options = Options(receiver->url());
  options.allow_hosts.clear();
  auto dispatcher = StartDispatcher(options, settle);
  ASSERT_TRUE(dispatcher);
  dispatcher->Deliver(MakeDelivery(1));
  ASSERT_TRUE(settle.WaitFor(1));
  auto nacks = settle.PerLease(SettleKind::kNack);
  ASSERT_EQ(nacks.size(), 1u);
  EXPECT_EQ(nacks[0].error,
            "destination address 127.0.0.1 is not allowed (private or loopback; see "
            "--queue-push-allow)");
  EXPECT_EQ(dispatcher->refused(), 1u);

  // A name that resolves to loopback is refused by its address too.
  FakeSettle settle2;
  options.url = "http://localhost:" + std::to_string(receiver->port()) + "/hook";
  auto by_name = StartDispatcher(options, settle2);
  ASSERT_TRUE(by_name);
  by_name->Deliver(MakeDelivery(2));
  ASSERT_TRUE(settle2.WaitFor(1));
  auto nacks2 = settle2.PerLease(SettleKind::kNack);
  ASSERT_EQ(nacks2.size(), 1u);
  EXPECT_EQ(nacks2[0].error.rfind("destination address ", 0), 0u) << nacks2[0].error;
  EXPECT_EQ(receiver->request_count(), 0u);  // nothing arrived
}

TEST(PushDispatcherTest, ConnectionFailureNacks) {
  const testutil::ClosedPort closed;  // refuses connections; nobody else can listen there
  ASSERT_NE(closed.port(), 0);
  FakeSettle settle;
  auto dispatcher = StartDispatcher(
      Options("http://127.0.0.1:" + std::to_string(closed.port()) + "/hook"), settle);
  ASSERT_TRUE(dispatcher);
  dispatcher->Deliver(MakeDelivery(1));
  ASSERT_TRUE(settle.WaitFor(1));
  auto nacks = settle.PerLease(SettleKind::kNack);
  ASSERT_EQ(nacks.size(), 1u);
  EXPECT_EQ(nacks[0].error.rfind("request failed: ", 0), 0u) << nacks[0].error;
}

TEST(PushDispatcherTest, ExpiredLeasesClosedAndStopped) {
  auto receiver = StartReceiver([](const ReceivedRequest&) { return ReceiverReply{204}; });
  ASSERT_TRUE(receiver);
  FakeSettle settle;
  auto dispatcher = StartDispatcher(Options(receiver->url()), settle);
  ASSERT_TRUE(dispatcher);
  Delivery expired = MakeDelivery(1);
  expired.lease_expires_ms = NowUnixMs() - 1;
  dispatcher->Deliver(expired);
  dispatcher->Deliver(MakeDelivery(2));
  ASSERT_TRUE(settle.WaitFor(1));
  EXPECT_EQ(dispatcher->expired(), 1u);
  EXPECT_EQ(settle.PerLease(SettleKind::kAck).size(), 1u);

  dispatcher->Closed(Unavailable("database retired"));
  dispatcher->Deliver(MakeDelivery(3));
  EXPECT_EQ(dispatcher->dropped(), 1u);
  dispatcher->Stop();
  dispatcher->Stop();  // idempotent
  dispatcher->Deliver(MakeDelivery(4));
  EXPECT_EQ(dispatcher->dropped(), 2u);
  EXPECT_EQ(receiver->request_count(), 1u);
  EXPECT_EQ(settle.requests().size(), 1u);
}

TEST(PushDispatcherTest, StopAbandonsRequestsInFlight) {
  auto receiver = StartReceiver([](const ReceivedRequest&) {
    return ReceiverReply{204, {}, 10000};
  });
  ASSERT_TRUE(receiver);
  FakeSettle settle;
  auto dispatcher = StartDispatcher(Options(receiver->url()), settle);
  ASSERT_TRUE(dispatcher);
  dispatcher->Deliver(MakeDelivery(1));
  const auto deadline = std::chrono::steady_clock::now() + kWait;
  while (receiver->request_count() == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(receiver->request_count(), 1u);
  const auto start = std::chrono::steady_clock::now();
  dispatcher->Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
  EXPECT_TRUE(settle.requests().empty());  // its lease just expires
}

// The independent check: Node's standardwebhooks verifies what we sign. The receiver knows
// only the second secret, as a receiver does during a rotation.
TEST(PushDispatcherTest, NodeStandardWebhooksVerifiesSignatures) {
  auto node = testutil::NodeWebhookReceiver::Start({kSecret2});
  if (!node.ok() && node.status().code() == StatusCode::kNotFound) {
    GTEST_SKIP() << node.status().message();
  }
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  FakeSettle settle;
  PushOptions options = Options((*node)->url());
  options.secrets = {kSecret, kSecret2};
  auto dispatcher = StartDispatcher(options, settle);
  ASSERT_TRUE(dispatcher);
  for (int i = 0; i < 3; ++i) dispatcher->Deliver(MakeDelivery(i));
  ASSERT_TRUE(settle.WaitFor(3)) << (*node)->Log();
  EXPECT_EQ(settle.PerLease(SettleKind::kAck).size(), 3u) << (*node)->Log();

  // Signed with a secret the receiver does not know: 401, a nack.
  FakeSettle settle2;
  options.secrets = {kSecret};
  auto wrong = StartDispatcher(options, settle2);
  ASSERT_TRUE(wrong);
  wrong->Deliver(MakeDelivery(9));
  ASSERT_TRUE(settle2.WaitFor(1));
  auto nacks = settle2.PerLease(SettleKind::kNack);
  ASSERT_EQ(nacks.size(), 1u) << (*node)->Log();
  EXPECT_EQ(nacks[0].error, "HTTP 401");
}

}  // namespace
}  // namespace kvc::queue
