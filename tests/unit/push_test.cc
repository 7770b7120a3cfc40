// Push delivery's pure parts: Standard Webhooks signatures against the specification's own
// test vector, the SSRF guard's address classes, Retry-After, outcomes and option errors.
#include "queue/push.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace kvc::queue {
namespace {

// The vector of the Standard Webhooks reference libraries ("sign function works" in
// standard-webhooks/libraries/javascript/src/webhook.test.ts, the same in the other languages);
// `openssl dgst -sha256 -mac HMAC -macopt hexkey:<key> -binary | base64` agrees.
constexpr char kSpecSecret[] = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
constexpr char kSpecMsgId[] = "msg_p5jXN8AQM9LWM0D4loKWxJek";
constexpr int64_t kSpecTimestamp = 1614265330;
constexpr char kSpecPayload[] = R"({"test": 2432232314})";
constexpr char kSpecSignature[] = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";

TEST(PushSignature, MatchesTheSpecificationVector) {
  auto key = DecodeWebhookSecret(kSpecSecret);
  ASSERT_TRUE(key.ok()) << key.status().ToString();
  EXPECT_EQ(key->size(), 24u);
  EXPECT_EQ(WebhookSignature(*key, kSpecMsgId, kSpecTimestamp, kSpecPayload), kSpecSignature);
}

TEST(PushSignature, TwoSecretsSignInOrderSpaceSeparated) {
  auto first = DecodeWebhookSecret(kSpecSecret);
  // 32 bytes 0x00..0x1f.
  auto second = DecodeWebhookSecret("whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=");
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  ASSERT_EQ(second->size(), 32u);
  EXPECT_EQ(static_cast<unsigned char>((*second)[31]), 0x1f);
  const std::string other = WebhookSignature(*second, kSpecMsgId, kSpecTimestamp, kSpecPayload);
  EXPECT_NE(other, kSpecSignature);
  EXPECT_EQ(WebhookSignatureHeader({*first, *second}, kSpecMsgId, kSpecTimestamp, kSpecPayload),
            std::string(kSpecSignature) + " " + other);
  EXPECT_EQ(WebhookSignatureHeader({*second, *first}, kSpecMsgId, kSpecTimestamp, kSpecPayload),
            other + " " + kSpecSignature);
}

TEST(PushSignature, SecretErrors) {
  struct Case {
    const char* secret;
    const char* error;
  };
  const Case cases[] = {
      {"MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "must start with 'whsec_'"},
      {"whsec_", "key bytes, has 0"},
      {"whsec_not*base64", "standard base64"},
      {"whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8-", "standard base64"},  // URL-safe
      {"whsec_AAAA===", "standard base64"},
      {"whsec_AAECAwQFBgcICQoLDA0ODxAR", "key bytes, has 18"},
  };
  for (const Case& c : cases) {
    auto key = DecodeWebhookSecret(c.secret);
    ASSERT_FALSE(key.ok()) << c.secret;
    EXPECT_EQ(key.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(key.status().message().find(c.error), std::string::npos)
        << c.secret << ": " << key.status().message();
  }
}

AddressClass ClassOf(const char* text) {
  auto a = ParseIpAddress(text);
  EXPECT_TRUE(a.ok()) << text;
  return a.ok() ? ClassifyAddress(*a) : AddressClass::kPublic;
}

TEST(PushAddress, Classes) {
  struct Case {
    const char* address;
    AddressClass expected;
  };
  const Case cases[] = {
      {"8.8.8.8", AddressClass::kPublic},
      {"1.1.1.1", AddressClass::kPublic},
      {"172.15.255.255", AddressClass::kPublic},
      {"172.32.0.1", AddressClass::kPublic},
      {"100.63.255.255", AddressClass::kPublic},
      {"100.128.0.1", AddressClass::kPublic},
      {"192.169.0.1", AddressClass::kPublic},
      {"127.0.0.1", AddressClass::kLoopback},
      {"127.255.255.254", AddressClass::kLoopback},
      {"10.0.0.1", AddressClass::kPrivate},
      {"172.16.0.1", AddressClass::kPrivate},
      {"172.31.255.255", AddressClass::kPrivate},
      {"192.168.1.1", AddressClass::kPrivate},
      {"169.254.169.254", AddressClass::kLinkLocal},  // cloud metadata
      {"100.64.0.1", AddressClass::kSharedCgnat},
      {"100.127.255.255", AddressClass::kSharedCgnat},
      {"0.0.0.0", AddressClass::kUnspecified},
      {"0.1.2.3", AddressClass::kUnspecified},
      {"224.0.0.1", AddressClass::kMulticast},
      {"239.255.255.255", AddressClass::kMulticast},
      {"240.0.0.1", AddressClass::kReserved},
      {"255.255.255.255", AddressClass::kReserved},
      {"192.0.0.8", AddressClass::kReserved},
      {"198.18.0.1", AddressClass::kReserved},
      {"2606:4700:4700::1111", AddressClass::kPublic},
      {"::", AddressClass::kUnspecified},
      {"::1", AddressClass::kLoopback},
      {"fc00::1", AddressClass::kPrivate},
      {"fdff:ffff::1", AddressClass::kPrivate},
      {"fec0::1", AddressClass::kPrivate},
      {"fe80::1", AddressClass::kLinkLocal},
      {"febf::1", AddressClass::kLinkLocal},
      {"ff02::1", AddressClass::kMulticast},
      {"::ffff:127.0.0.1", AddressClass::kLoopback},  // IPv4-mapped
      {"::ffff:10.1.2.3", AddressClass::kPrivate},
      {"::ffff:169.254.169.254", AddressClass::kLinkLocal},
      {"::ffff:8.8.8.8", AddressClass::kPublic},
      {"::127.0.0.1", AddressClass::kLoopback},       // IPv4-compatible
      {"64:ff9b::10.0.0.1", AddressClass::kPrivate},  // NAT64
      {"64:ff9b::8.8.8.8", AddressClass::kPublic},
      {"2002:7f00:1::", AddressClass::kLoopback},  // 6to4 of 127.0.0.1
      {"2002:0808:0808::", AddressClass::kPublic},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(AddressClassName(ClassOf(c.address)), AddressClassName(c.expected)) << c.address;
  }
}

bool Allowed(const char* address, const std::vector<std::string>& allow) {
  std::vector<IpNetwork> networks;
  for (const std::string& entry : allow) {
    auto n = ParseIpNetwork(entry);
    EXPECT_TRUE(n.ok()) << entry;
    if (n.ok()) networks.push_back(*n);
  }
  auto a = ParseIpAddress(address);
  EXPECT_TRUE(a.ok()) << address;
  return a.ok() && DestinationAllowed(*a, networks);
}

TEST(PushAddress, AllowList) {
  EXPECT_TRUE(Allowed("8.8.8.8", {}));
  EXPECT_FALSE(Allowed("127.0.0.1", {}));
  EXPECT_TRUE(Allowed("127.0.0.1", {"127.0.0.1"}));
  EXPECT_TRUE(Allowed("::ffff:127.0.0.1", {"127.0.0.1"}));
  EXPECT_FALSE(Allowed("127.0.0.2", {"127.0.0.1"}));
  EXPECT_FALSE(Allowed("::1", {"127.0.0.1"}));
  EXPECT_TRUE(Allowed("::1", {"::1"}));
  EXPECT_TRUE(Allowed("10.200.3.4", {"10.0.0.0/8"}));
  EXPECT_FALSE(Allowed("192.168.0.1", {"10.0.0.0/8"}));
  EXPECT_TRUE(Allowed("172.20.0.1", {"172.16.0.0/12"}));
  EXPECT_TRUE(Allowed("172.32.0.1", {}));  // public
  EXPECT_TRUE(Allowed("fd12:3456::1", {"fd00::/8"}));
  EXPECT_FALSE(Allowed("fe80::1", {"fd00::/8"}));
  EXPECT_TRUE(Allowed("169.254.169.254", {"0.0.0.0/0"}));
}

TEST(PushAddress, ParseErrors) {
  for (const char* bad : {"localhost", "example.com", "10.0.0.0/33", "10.0.0.0/", "::/129",
                          "1.2.3.4/x", "1.2.3", "01.2.3.4", "1.2.3.4/-1", ""}) {
    EXPECT_FALSE(ParseIpNetwork(bad).ok()) << bad;
  }
  auto n = ParseIpNetwork("10.0.0.0/8");
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(n->prefix_len, 8);
  EXPECT_EQ(FormatIpAddress(n->base), "10.0.0.0");
  auto v6 = ParseIpAddress("::ffff:10.1.2.3");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(FormatIpAddress(UnmapIpv4(*v6)), "10.1.2.3");
}

// 2015-10-21T07:28:00Z, as `date -u -d 2015-10-21T07:28:00Z +%s` says.
constexpr int64_t kDateMs = 1445412480LL * 1000;

TEST(PushRetryAfter, SecondsAndDates) {
  EXPECT_EQ(ParseRetryAfterMs("2", 0), 2000);
  EXPECT_EQ(ParseRetryAfterMs(" 120 ", 0), 120000);
  EXPECT_EQ(ParseRetryAfterMs("0", 0), 0);
  EXPECT_EQ(ParseRetryAfterMs("Wed, 21 Oct 2015 07:28:00 GMT", kDateMs - 5000), 5000);
  EXPECT_EQ(ParseRetryAfterMs("Wednesday, 21-Oct-15 07:28:00 GMT", kDateMs - 1000), 1000);
  EXPECT_EQ(ParseRetryAfterMs("Wed Oct 21 07:28:00 2015", kDateMs - 3000), 3000);
  EXPECT_EQ(ParseRetryAfterMs("Wed, 21 Oct 2015 07:28:00 GMT", kDateMs + 60000), 0);  // past
  EXPECT_EQ(ParseRetryAfterMs("", 0), std::nullopt);
  EXPECT_EQ(ParseRetryAfterMs("soon", 0), std::nullopt);
  EXPECT_GT(*ParseRetryAfterMs("99999999999999999999", 0), 0);  // huge: bounded by the caller
}

TEST(PushOutcome, HttpStatuses) {
  const int64_t max = 3600 * 1000;
  for (long ok : {200L, 201L, 202L, 204L, 299L}) {
    EXPECT_TRUE(OutcomeOfHttpStatus(ok, std::nullopt, 0, max).ack) << ok;
  }
  for (long bad : {100L, 301L, 302L, 400L, 401L, 404L, 500L, 502L}) {
    PushOutcome o = OutcomeOfHttpStatus(bad, "5", 0, max);
    EXPECT_FALSE(o.ack) << bad;
    EXPECT_EQ(o.error, "HTTP " + std::to_string(bad));
    EXPECT_FALSE(o.delay_ms.has_value()) << bad;  // Retry-After only on 429 and 503
  }
  PushOutcome unavailable = OutcomeOfHttpStatus(503, "2", 0, max);
  EXPECT_FALSE(unavailable.ack);
  EXPECT_EQ(unavailable.error, "HTTP 503");
  EXPECT_EQ(unavailable.delay_ms, 2000);
  EXPECT_EQ(OutcomeOfHttpStatus(429, "7200", 0, max).delay_ms, max);  // bounded
  EXPECT_EQ(OutcomeOfHttpStatus(429, "Wed, 21 Oct 2015 07:28:00 GMT", kDateMs - 4000, max).delay_ms,
            4000);
  EXPECT_FALSE(OutcomeOfHttpStatus(503, "whenever", 0, max).delay_ms.has_value());
  EXPECT_FALSE(OutcomeOfHttpStatus(503, std::nullopt, 0, max).delay_ms.has_value());
  EXPECT_EQ(OutcomeOfHttpStatus(410, std::nullopt, 0, max).error, "HTTP 410 (Gone)");
}

PushOptions ValidOptions() {
  PushOptions o;
  o.url = "https://hooks.example.com/kv?tenant=1";
  o.secrets = {kSpecSecret};
  return o;
}

TEST(PushOptions, Validation) {
  EXPECT_TRUE(ValidatePushOptions(ValidOptions()).ok())
      << ValidatePushOptions(ValidOptions()).ToString();
  PushOptions two = ValidOptions();
  two.secrets.push_back("whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=");
  two.allow_hosts = {"127.0.0.1", "10.0.0.0/8", "fd00::/8"};
  two.format = "v8";
  EXPECT_TRUE(ValidatePushOptions(two).ok()) << ValidatePushOptions(two).ToString();

  struct Case {
    void (*mutate)(PushOptions&);
    const char* error;
  };
  const Case cases[] = {
      {[](PushOptions& o) { o.url.clear(); }, "push URL is required"},
      {[](PushOptions& o) { o.url = "not a url"; }, "push URL is not a valid URL"},
      {[](PushOptions& o) { o.url = "ftp://example.com/x"; }, "push URL must use http or https"},
      {[](PushOptions& o) { o.url = "https://user:pw@example.com/"; },
       "push URL must not contain a user name or password"},
      {[](PushOptions& o) { o.secrets.clear(); }, "push needs 1 or 2 secrets"},
      {[](PushOptions& o) {
         o.secrets = {kSpecSecret, kSpecSecret, kSpecSecret};
       },
       "push needs 1 or 2 secrets (whsec_<base64>; two while rotating), got 3"},
      {[](PushOptions& o) { o.secrets.push_back("secret"); },
       "push secret 2 must start with 'whsec_'"},
      {[](PushOptions& o) { o.concurrency = 0; }, "push concurrency must be 1 to 1000, got 0"},
      {[](PushOptions& o) { o.concurrency = 1001; }, "push concurrency must be 1 to 1000"},
      {[](PushOptions& o) { o.timeout_ms = 50; }, "push timeout must be 100 to 600000 ms, got 50"},
      {[](PushOptions& o) { o.visibility_ms = o.timeout_ms; },
       "push visibility timeout must be more than the request timeout (30000 ms)"},
      {[](PushOptions& o) { o.visibility_ms = 13LL * 3600 * 1000; },
       "push visibility timeout must be more than"},
      {[](PushOptions& o) { o.allow_hosts = {"localhost"}; },
       "push allow-list entry 'localhost' is not an IP address or CIDR"},
      {[](PushOptions& o) { o.allow_hosts = {"10.0.0.0/40"}; },
       "push allow-list entry '10.0.0.0/40'"},
      {[](PushOptions& o) { o.format = "xml"; }, R"(push format must be "json" or "v8")"},
      {[](PushOptions& o) { o.max_retry_after_ms = -1; }, "push Retry-After bound"},
  };
  for (const Case& c : cases) {
    PushOptions o = ValidOptions();
    c.mutate(o);
    const Status s = ValidatePushOptions(o);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.error;
    EXPECT_EQ(s.message().rfind(c.error, 0), 0u)
        << "want prefix: " << c.error << "\n got: " << s.message();
  }
}

TEST(PushOptions, StartRefusesInvalidOptions) {
  PushOptions o = ValidOptions();
  o.secrets.clear();
  auto d = PushDispatcher::Start(
      o, [](SettleRequest, Queue::SettleCallback) {},
      [](const Delivery&) -> Result<std::string> { return std::string("{}"); });
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument);
}

TEST(PushBody, Shape) {
  Delivery d;
  d.id = "0b1c6f0e-6a53-4a57-9d1e-0d5b8b0c2f41";
  d.attempt = 3;
  EXPECT_EQ(PushBody(d, R"({"type":"string","value":"hi"})", 1000),
            R"({"type":"kvconnect.queue.message","timestamp":"1970-01-01T00:00:01.000Z",)"
            R"("data":{"id":"0b1c6f0e-6a53-4a57-9d1e-0d5b8b0c2f41","attempt":3,)"
            R"("value":{"type":"string","value":"hi"}}})");
}

}  // namespace
}  // namespace kvc::queue
