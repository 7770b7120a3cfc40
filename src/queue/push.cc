#include "queue/push.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <ctime>
#include <iterator>
#include <map>
#include <mutex>
#include <utility>

#include "codec/json_text.h"
#include "common/enum_names.h"
#include "common/random.h"
#include "common/thread_name.h"

namespace kvc::queue {
namespace {

constexpr std::string_view kSecretPrefix = "whsec_";
// The dispatcher thread wakes at least this often while idle (libcurl's own timeouts and
// curl_multi_wakeup wake it sooner).
constexpr int kIdlePollMs = 1000;
// Queue::Settle takes at most this many leases per request (docs/queues.md).
constexpr size_t kMaxLeasesPerSettle = 100;

void InitCurlOnce() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() &&
         (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n')) {
    s.remove_suffix(1);
  }
  return s;
}

bool StartsWithNoCase(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(s[i])) !=
        std::tolower(static_cast<unsigned char>(prefix[i]))) {
      return false;
    }
  }
  return true;
}

// Standard base64 (RFC 4648 section 4) with padding.
std::string Base64Encode(std::string_view bytes) {
  std::string out = Base64UrlEncode(std::string(bytes));
  for (char& c : out) {
    if (c == '-') c = '+';
    if (c == '_') c = '/';
  }
  while (out.size() % 4 != 0) out.push_back('=');
  return out;
}

// Standard base64, padded or not. False on anything else.
bool Base64Decode(std::string_view text, std::string* out) {
  size_t padding = 0;
  while (!text.empty() && text.back() == '=') {
    text.remove_suffix(1);
    ++padding;
  }
  if (padding > 2 || (padding > 0 && (text.size() + padding) % 4 != 0)) return false;
  if (text.size() % 4 == 1) return false;
  std::string url(text);
  for (char& c : url) {
    if (c == '+') {
      c = '-';
    } else if (c == '/') {
      c = '_';
    } else if (c == '-' || c == '_') {
      return false;  // the URL-safe alphabet is not what whsec_ secrets use
    }
  }
  return Base64UrlDecode(url, out);
}

AddressClass ClassifyIpv4(const uint8_t* b) {
  if (b[0] == 0) return AddressClass::kUnspecified;
  if (b[0] == 127) return AddressClass::kLoopback;
  if (b[0] == 10 || (b[0] == 172 && (b[1] & 0xf0) == 16) || (b[0] == 192 && b[1] == 168)) {
    return AddressClass::kPrivate;
  }
  if (b[0] == 169 && b[1] == 254) return AddressClass::kLinkLocal;
  if (b[0] == 100 && (b[1] & 0xc0) == 64) return AddressClass::kSharedCgnat;
  if (b[0] >= 224 && b[0] < 240) return AddressClass::kMulticast;
  if (b[0] >= 240) return AddressClass::kReserved;
  if ((b[0] == 192 && b[1] == 0 && b[2] == 0) || (b[0] == 198 && (b[1] & 0xfe) == 18)) {
    return AddressClass::kReserved;
  }
  return AddressClass::kPublic;
}

bool AllZero(const uint8_t* b, size_t n) {
  return std::all_of(b, b + n, [](uint8_t x) { return x == 0; });
}

// The address of a socket address libcurl is about to connect to.
bool FromSockaddr(const sockaddr* addr, int family, IpAddress* out) {
  if (family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(addr);
    out->v6 = false;
    out->bytes = {};
    std::memcpy(out->bytes.data(), &in->sin_addr, 4);
    return true;
  }
  if (family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(addr);
    out->v6 = true;
    std::memcpy(out->bytes.data(), &in6->sin6_addr, 16);
    return true;
  }
  return false;
}

// A webhook-id may not hold '.' (it delimits the signed content) nor anything a header cannot.
bool IsValidWebhookId(std::string_view id) {
  return !id.empty() &&
         std::all_of(id.begin(), id.end(), [](char c) { return c > ' ' && c < 0x7f && c != '.'; });
}

Status ValidateUrl(const std::string& url) {
  if (url.empty()) return InvalidArgument("push URL is required");
  CURLU* u = curl_url();
  if (u == nullptr) return Internal("libcurl: out of memory");
  struct Free {
    CURLU* u;
    ~Free() { curl_url_cleanup(u); }
  } free_url{u};
  if (curl_url_set(u, CURLUPART_URL, url.c_str(), CURLU_NON_SUPPORT_SCHEME) != CURLUE_OK) {
    return InvalidArgument("push URL is not a valid URL (expected http(s)://host[:port]/path)");
  }
  auto part = [u](CURLUPart which) {
    char* value = nullptr;
    std::string out;
    if (curl_url_get(u, which, &value, 0) == CURLUE_OK && value != nullptr) out = value;
    curl_free(value);
    return out;
  };
  std::string scheme = part(CURLUPART_SCHEME);
  std::transform(scheme.begin(), scheme.end(), scheme.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (scheme != "http" && scheme != "https") {
    return InvalidArgument("push URL must use http or https");
  }
  if (!part(CURLUPART_USER).empty() || !part(CURLUPART_PASSWORD).empty()) {
    return InvalidArgument(
        "push URL must not contain a user name or password (receivers authenticate requests by "
        "their webhook signature)");
  }
  if (part(CURLUPART_HOST).empty()) return InvalidArgument("push URL has no host");
  return Status::Ok();
}

}  // namespace

Status ValidatePushOptions(const PushOptions& o) {
  KVC_RETURN_IF_ERROR(ValidateUrl(o.url));
  if (o.secrets.empty() || o.secrets.size() > 2) {
    return InvalidArgument("push needs 1 or 2 secrets (whsec_<base64>; two while rotating), got " +
                           std::to_string(o.secrets.size()));
  }
  for (size_t i = 0; i < o.secrets.size(); ++i) {
    auto key = DecodeWebhookSecret(o.secrets[i]);
    if (!key.ok()) {
      return InvalidArgument("push secret " + std::to_string(i + 1) + " " + key.status().message());
    }
  }
  if (o.concurrency < 1 || o.concurrency > kMaxPushConcurrency) {
    return InvalidArgument("push concurrency must be 1 to " + std::to_string(kMaxPushConcurrency) +
                           ", got " + std::to_string(o.concurrency));
  }
  if (o.timeout_ms < kMinPushTimeoutMs || o.timeout_ms > kMaxPushTimeoutMs) {
    return InvalidArgument("push timeout must be " + std::to_string(kMinPushTimeoutMs) + " to " +
                           std::to_string(kMaxPushTimeoutMs) + " ms, got " +
                           std::to_string(o.timeout_ms));
  }
  if (o.visibility_ms <= o.timeout_ms || o.visibility_ms > kMaxPushVisibilityMs) {
    return InvalidArgument("push visibility timeout must be more than the request timeout (" +
                           std::to_string(o.timeout_ms) + " ms) and at most " +
                           std::to_string(kMaxPushVisibilityMs) + " ms, got " +
                           std::to_string(o.visibility_ms));
  }
  for (const std::string& entry : o.allow_hosts) {
    auto network = ParseIpNetwork(entry);
    if (!network.ok()) {
      return InvalidArgument("push allow-list entry '" + entry +
                             "' is not an IP address or CIDR (e.g. 127.0.0.1, 10.0.0.0/8, "
                             "fd00::/8; host names are not accepted)");
    }
  }
  if (o.format != "json" && o.format != "v8") {
    return InvalidArgument("push format must be \"json\" or \"v8\", got \"" + o.format + "\"");
  }
  if (o.max_retry_after_ms < 0 || o.max_retry_after_ms > kMaxPushVisibilityMs) {
    return InvalidArgument("push Retry-After bound must be 0 to " +
                           std::to_string(kMaxPushVisibilityMs) + " ms");
  }
  return Status::Ok();
}

Result<std::string> DecodeWebhookSecret(std::string_view secret) {
  if (secret.substr(0, kSecretPrefix.size()) != kSecretPrefix) {
    return InvalidArgument("must start with 'whsec_' (whsec_<base64 of the key>)");
  }
  std::string key;
  if (!Base64Decode(secret.substr(kSecretPrefix.size()), &key)) {
    return InvalidArgument("is not whsec_ followed by standard base64");
  }
  if (key.size() < kMinWebhookKeyBytes || key.size() > kMaxWebhookKeyBytes) {
    return InvalidArgument("must hold " + std::to_string(kMinWebhookKeyBytes) + " to " +
                           std::to_string(kMaxWebhookKeyBytes) + " key bytes, has " +
                           std::to_string(key.size()));
  }
  return key;
}

std::string WebhookSignature(std::string_view key, std::string_view id, int64_t timestamp_s,
                             std::string_view body) {
  std::string content;
  content.reserve(id.size() + body.size() + 24);
  content.append(id);
  content.push_back('.');
  content.append(std::to_string(timestamp_s));
  content.push_back('.');
  content.append(body);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(content.data()), content.size(), mac, &len);
  return "v1," + Base64Encode(std::string_view(reinterpret_cast<const char*>(mac), len));
}

std::string WebhookSignatureHeader(const std::vector<std::string>& keys, std::string_view id,
                                   int64_t timestamp_s, std::string_view body) {
  std::string out;
  for (const std::string& key : keys) {
    if (!out.empty()) out.push_back(' ');
    out += WebhookSignature(key, id, timestamp_s, body);
  }
  return out;
}

Result<IpAddress> ParseIpAddress(std::string_view text) {
  const std::string s(text);
  IpAddress a;
  if (inet_pton(AF_INET, s.c_str(), a.bytes.data()) == 1) return a;
  a.bytes = {};
  if (inet_pton(AF_INET6, s.c_str(), a.bytes.data()) == 1) {
    a.v6 = true;
    return a;
  }
  return InvalidArgument("not an IP address: " + s);
}

std::string FormatIpAddress(const IpAddress& address) {
  char buffer[INET6_ADDRSTRLEN] = {};
  inet_ntop(address.v6 ? AF_INET6 : AF_INET, address.bytes.data(), buffer, sizeof buffer);
  return buffer;
}

IpAddress UnmapIpv4(const IpAddress& address) {
  const uint8_t* b = address.bytes.data();
  if (!address.v6 || !AllZero(b, 10) || b[10] != 0xff || b[11] != 0xff) return address;
  IpAddress v4;
  std::memcpy(v4.bytes.data(), b + 12, 4);
  return v4;
}

bool IpNetwork::Contains(const IpAddress& address) const {
  if (address.v6 != base.v6) return false;
  int bits = prefix_len;
  for (size_t i = 0; bits > 0; ++i, bits -= 8) {
    const uint8_t mask = bits >= 8 ? 0xff : static_cast<uint8_t>(0xff << (8 - bits));
    if ((address.bytes[i] & mask) != (base.bytes[i] & mask)) return false;
  }
  return true;
}

Result<IpNetwork> ParseIpNetwork(std::string_view text) {
  const size_t slash = text.find('/');
  KVC_ASSIGN_OR_RETURN(IpAddress base, ParseIpAddress(text.substr(0, slash)));
  const int max_len = base.v6 ? 128 : 32;
  IpNetwork network{base, max_len};
  if (slash == std::string_view::npos) return network;
  const std::string_view len = text.substr(slash + 1);
  if (len.empty() || len.size() > 3 ||
      !std::all_of(len.begin(), len.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return InvalidArgument("bad prefix length in " + std::string(text));
  }
  network.prefix_len = std::stoi(std::string(len));
  if (network.prefix_len > max_len) {
    return InvalidArgument("bad prefix length in " + std::string(text));
  }
  return network;
}

namespace {
constexpr EnumName<AddressClass> kAddressClassNames[] = {
    {AddressClass::kPublic, "public"},
    {AddressClass::kLoopback, "loopback"},
    {AddressClass::kPrivate, "private"},
    {AddressClass::kLinkLocal, "link-local"},
    {AddressClass::kSharedCgnat, "shared (CGNAT)"},
    {AddressClass::kUnspecified, "unspecified"},
    {AddressClass::kMulticast, "multicast"},
    {AddressClass::kReserved, "reserved"},
};
}  // namespace

const char* AddressClassName(AddressClass c) { return NameIn(kAddressClassNames, c, "?"); }

AddressClass ClassifyAddress(const IpAddress& address) {
  const uint8_t* b = address.bytes.data();
  if (!address.v6) return ClassifyIpv4(b);
  if (AllZero(b, 16)) return AddressClass::kUnspecified;
  if (AllZero(b, 15) && b[15] == 1) return AddressClass::kLoopback;
  // IPv4-mapped ::ffff:0:0/96 and IPv4-compatible ::/96.
  if (AllZero(b, 10) && ((b[10] == 0xff && b[11] == 0xff) || (b[10] == 0 && b[11] == 0))) {
    return ClassifyIpv4(b + 12);
  }
  // NAT64 64:ff9b::/96.
  if (b[0] == 0x00 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b && AllZero(b + 4, 8)) {
    return ClassifyIpv4(b + 12);
  }
  // 6to4 2002::/16 (the IPv4 address in bits 16..47).
  if (b[0] == 0x20 && b[1] == 0x02) return ClassifyIpv4(b + 2);
  if ((b[0] & 0xfe) == 0xfc) return AddressClass::kPrivate;
  if (b[0] == 0xfe && (b[1] & 0xc0) == 0x80) return AddressClass::kLinkLocal;
  if (b[0] == 0xfe && (b[1] & 0xc0) == 0xc0) return AddressClass::kPrivate;  // site-local
  if (b[0] == 0xff) return AddressClass::kMulticast;
  return AddressClass::kPublic;
}

bool DestinationAllowed(const IpAddress& address, const std::vector<IpNetwork>& allow) {
  if (ClassifyAddress(address) == AddressClass::kPublic) return true;
  const IpAddress unmapped = UnmapIpv4(address);
  return std::any_of(allow.begin(), allow.end(), [&](const IpNetwork& n) {
    return n.Contains(address) || n.Contains(unmapped);
  });
}

std::optional<int64_t> ParseRetryAfterMs(std::string_view value, int64_t now_ms) {
  value = Trim(value);
  if (value.empty()) return std::nullopt;
  if (std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    // Longer than 31 years is as good as forever; the caller bounds it anyway.
    if (value.size() > 9) value = "999999999";
    return std::stoll(std::string(value)) * 1000;
  }
  // An HTTP-date (IMF-fixdate, or the obsolete RFC 850 and asctime forms).
  const time_t t = curl_getdate(std::string(value).c_str(), nullptr);
  if (t == -1) return std::nullopt;
  return std::max<int64_t>(0, static_cast<int64_t>(t) * 1000 - now_ms);
}

PushOutcome OutcomeOfHttpStatus(long status, std::optional<std::string_view> retry_after,
                                int64_t now_ms, int64_t max_retry_after_ms) {
  PushOutcome out;
  if (status >= 200 && status <= 299) {
    out.ack = true;
    return out;
  }
  out.error = "HTTP " + std::to_string(status);
  if (status == 410) out.error += " (Gone)";
  if ((status == 429 || status == 503) && retry_after.has_value()) {
    const std::optional<int64_t> delay = ParseRetryAfterMs(*retry_after, now_ms);
    if (delay.has_value()) out.delay_ms = std::min(*delay, max_retry_after_ms);
  }
  return out;
}

std::string PushBody(const Delivery& delivery, std::string_view value_json, int64_t timestamp_ms) {
  std::string out = R"({"type":"kvconnect.queue.message","timestamp":)";
  codec::AppendJsonQuoted(FormatRfc3339Utc(timestamp_ms), &out);
  out += R"(,"data":{"id":)";
  codec::AppendJsonQuoted(delivery.id, &out);
  out += R"(,"attempt":)" + std::to_string(delivery.attempt) + R"(,"value":)";
  out.append(value_json);
  out += "}}";
  return out;
}

// One POST in flight; libcurl's callbacks see it through their userdata.
struct PushTransfer {
  PushTransfer() = default;
  ~PushTransfer() { curl_slist_free_all(headers); }
  PushTransfer(const PushTransfer&) = delete;
  PushTransfer& operator=(const PushTransfer&) = delete;

  Delivery delivery;
  std::string body;
  curl_slist* headers = nullptr;
  const std::vector<IpNetwork>* allow = nullptr;
  char error[CURL_ERROR_SIZE] = {};
  std::string refused;                     // the first address the guard refused
  std::optional<std::string> retry_after;  // of the last answer's headers
};

// The multi handle and the easy handles. Only the dispatcher thread uses them, except for
// curl_multi_wakeup on `multi`, which libcurl allows from any thread.
struct PushCurl {
  PushCurl() = default;
  ~PushCurl() {
    for (auto& [easy, transfer] : active) {
      curl_multi_remove_handle(multi, easy);
      curl_easy_cleanup(easy);
    }
    for (CURL* easy : idle) curl_easy_cleanup(easy);
    if (multi != nullptr) curl_multi_cleanup(multi);
  }
  PushCurl(const PushCurl&) = delete;
  PushCurl& operator=(const PushCurl&) = delete;

  CURLM* multi = nullptr;
  std::vector<CURL*> idle;
  std::map<CURL*, std::unique_ptr<PushTransfer>> active;
};

namespace {

// The SSRF guard: libcurl asks for each socket it is about to connect, with the address it
// resolved; a refused address fails that connection attempt.
curl_socket_t OnOpenSocket(void* clientp, curlsocktype purpose, curl_sockaddr* address) {
  auto* t = static_cast<PushTransfer*>(clientp);
  IpAddress ip;
  if (purpose != CURLSOCKTYPE_IPCXN || !FromSockaddr(&address->addr, address->family, &ip)) {
    if (t->refused.empty()) t->refused = "(not an IP connection)";
    return CURL_SOCKET_BAD;
  }
  if (!DestinationAllowed(ip, *t->allow)) {
    if (t->refused.empty()) t->refused = FormatIpAddress(ip);
    return CURL_SOCKET_BAD;
  }
  return ::socket(address->family, address->socktype | SOCK_CLOEXEC, address->protocol);
}

size_t OnHeader(char* data, size_t size, size_t nitems, void* userdata) {
  auto* t = static_cast<PushTransfer*>(userdata);
  const size_t n = size * nitems;
  const std::string_view line(data, n);
  constexpr std::string_view kRetryAfter = "retry-after:";
  if (line.substr(0, 5) == "HTTP/") {
    t->retry_after.reset();  // a new answer (after a 1xx)
  } else if (StartsWithNoCase(line, kRetryAfter)) {
    t->retry_after = std::string(Trim(line.substr(kRetryAfter.size())));
  }
  return n;
}

size_t OnWrite(char* /*data*/, size_t size, size_t nmemb, void* /*userdata*/) {
  return size * nmemb;  // the answer's body is not used
}

// Fills t->headers: the content type and the webhook id, timestamp and signature (with every
// key in `keys`) of t->delivery and t->body. Returns false if libcurl runs out of memory.
bool AppendWebhookHeaders(const std::vector<std::string>& keys, int64_t now_ms, PushTransfer* t) {
  const int64_t timestamp_s = now_ms / 1000;
  const std::string lines[] = {
      "Content-Type: application/json",
      "webhook-id: " + t->delivery.id,
      "webhook-timestamp: " + std::to_string(timestamp_s),
      "webhook-signature: " + WebhookSignatureHeader(keys, t->delivery.id, timestamp_s, t->body),
      "Expect:",  // no 100-continue round trip for larger bodies
  };
  for (const std::string& line : lines) {
    curl_slist* list = curl_slist_append(t->headers, line.c_str());
    if (list == nullptr) return false;
    t->headers = list;
  }
  return true;
}

// An idle easy handle, else a new one; nullptr if libcurl cannot create one.
CURL* TakeEasyHandle(PushCurl* curl) {
  if (curl->idle.empty()) return curl_easy_init();
  CURL* easy = curl->idle.back();
  curl->idle.pop_back();
  return easy;
}

// Sets `easy` up to POST t->body to options.url through the SSRF guard, with t's headers and
// callbacks. Returns the first option libcurl refused, or CURLE_OK.
CURLcode ConfigureTransfer(CURL* easy, const PushOptions& options, PushTransfer* t) {
  CURLcode first_error = CURLE_OK;
  auto set = [&](CURLoption option, auto value) {
    const CURLcode code = curl_easy_setopt(easy, option, value);
    if (code != CURLE_OK && first_error == CURLE_OK) first_error = code;
  };
  set(CURLOPT_URL, options.url.c_str());
  set(CURLOPT_PROTOCOLS_STR, "http,https");
  set(CURLOPT_FOLLOWLOCATION, 0L);
  set(CURLOPT_PROXY, "");  // no proxy, whatever the environment says
  set(CURLOPT_NOSIGNAL, 1L);
  set(CURLOPT_ERRORBUFFER, t->error);
  set(CURLOPT_POST, 1L);
  set(CURLOPT_POSTFIELDS, t->body.data());
  set(CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(t->body.size()));
  set(CURLOPT_HTTPHEADER, t->headers);
  set(CURLOPT_USERAGENT, "kvconnect");
  set(CURLOPT_TIMEOUT_MS, static_cast<long>(options.timeout_ms));
  set(CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(options.timeout_ms));
  set(CURLOPT_OPENSOCKETFUNCTION, OnOpenSocket);
  set(CURLOPT_OPENSOCKETDATA, t);
  set(CURLOPT_HEADERFUNCTION, OnHeader);
  set(CURLOPT_HEADERDATA, t);
  set(CURLOPT_WRITEFUNCTION, OnWrite);
  return first_error;
}

}  // namespace

PushDispatcher::PushDispatcher(PushOptions options, SettleFn settle, RenderFn render,
                               const Clock* clock)
    : options_(std::move(options)),
      settle_(std::move(settle)),
      render_(std::move(render)),
      clock_(clock),
      curl_(std::make_unique<PushCurl>()) {}

Result<std::shared_ptr<PushDispatcher>> PushDispatcher::Start(PushOptions options, SettleFn settle,
                                                              RenderFn render, const Clock* clock) {
  KVC_RETURN_IF_ERROR(ValidatePushOptions(options));
  std::shared_ptr<PushDispatcher> d(
      new PushDispatcher(std::move(options), std::move(settle), std::move(render), clock));
  for (const std::string& secret : d->options_.secrets) {
    KVC_ASSIGN_OR_RETURN(std::string key, DecodeWebhookSecret(secret));
    d->keys_.push_back(std::move(key));
  }
  for (const std::string& entry : d->options_.allow_hosts) {
    KVC_ASSIGN_OR_RETURN(IpNetwork network, ParseIpNetwork(entry));
    d->allow_.push_back(network);
  }
  InitCurlOnce();
  d->curl_->multi = curl_multi_init();
  if (d->curl_->multi == nullptr) return Internal("libcurl: cannot create a multi handle");
  d->thread_ = std::thread([raw = d.get()] {
    NameThisThread("kvc-push");
    raw->Run();
  });
  return d;
}

PushDispatcher::~PushDispatcher() { Stop(); }

void PushDispatcher::Stop() {
  MutexLock join_lock(join_mu_);
  {
    MutexLock lock(mu_);
    stop_ = true;
  }
  if (curl_->multi != nullptr) curl_multi_wakeup(curl_->multi);
  if (thread_.joinable()) thread_.join();
}

void PushDispatcher::Deliver(Delivery d) {
  bool accepted = false;
  {
    MutexLock lock(mu_);
    if (!closed_ && !stop_) {
      pending_.push_back(std::move(d));
      accepted = true;
    }
  }
  if (!accepted) {
    counters_->dropped.fetch_add(1);  // its lease expires
    return;
  }
  curl_multi_wakeup(curl_->multi);
}

void PushDispatcher::Closed(const Status& /*why*/) {
  size_t dropped = 0;
  {
    MutexLock lock(mu_);
    closed_ = true;
    dropped = pending_.size();
    pending_.clear();
  }
  counters_->dropped.fetch_add(dropped);
}

ConsumerOptions PushDispatcher::consumer_options() const {
  ConsumerOptions out;
  out.max_in_flight = options_.concurrency;
  out.visibility_ms = options_.visibility_ms;
  return out;
}

void PushDispatcher::Run() {
  CURLM* multi = curl_->multi;
  for (;;) {
    std::vector<Delivery> start;
    {
      MutexLock lock(mu_);
      if (stop_) break;
      while (!pending_.empty() && in_flight_.load() + start.size() < options_.concurrency) {
        start.push_back(std::move(pending_.front()));
        pending_.pop_front();
      }
    }
    for (Delivery& d : start) StartTransfer(std::move(d));
    int running = 0;
    curl_multi_perform(multi, &running);
    int left = 0;
    while (CURLMsg* msg = curl_multi_info_read(multi, &left)) {
      if (msg->msg != CURLMSG_DONE) continue;
      // Copied first: removing the handle invalidates `msg`.
      CURL* easy = msg->easy_handle;
      const CURLcode result = msg->data.result;
      FinishTransfer(easy, result);
    }
    FlushAcks();
    bool more = false;
    {
      MutexLock lock(mu_);
      more = !pending_.empty() && in_flight_.load() < options_.concurrency;
    }
    if (!more) curl_multi_poll(multi, nullptr, 0, kIdlePollMs, nullptr);
  }
  // Abandoned: their leases expire.
  for (auto& [easy, transfer] : curl_->active) {
    curl_multi_remove_handle(multi, easy);
    curl_easy_cleanup(easy);
  }
  curl_->active.clear();
  in_flight_.store(0);
}

void PushDispatcher::StartTransfer(Delivery d) {
  const int64_t now_ms = clock_->NowMs();
  if (d.lease_expires_ms > 0 && now_ms >= d.lease_expires_ms) {
    counters_->expired.fetch_add(1);
    return;
  }
  if (!IsValidWebhookId(d.id)) {
    Nack(d.lease, std::nullopt, "message id '" + d.id + "' cannot be a webhook-id");
    return;
  }
  Result<std::string> body = render_(d);
  if (!body.ok()) {
    Nack(d.lease, std::nullopt, "cannot render the message: " + body.status().message());
    return;
  }
  auto t = std::make_unique<PushTransfer>();
  t->delivery = std::move(d);
  t->body = std::move(body).value();
  t->allow = &allow_;
  if (!AppendWebhookHeaders(keys_, now_ms, t.get())) {
    Nack(t->delivery.lease, std::nullopt, "libcurl: out of memory");
    return;
  }
  CURL* easy = TakeEasyHandle(curl_.get());
  if (easy == nullptr) {
    Nack(t->delivery.lease, std::nullopt, "libcurl: cannot create a handle");
    return;
  }
  CURLcode first_error = ConfigureTransfer(easy, options_, t.get());
  if (first_error == CURLE_OK && curl_multi_add_handle(curl_->multi, easy) != CURLM_OK) {
    first_error = CURLE_OUT_OF_MEMORY;
  }
  if (first_error != CURLE_OK) {
    const std::string lease = t->delivery.lease;
    curl_easy_reset(easy);
    curl_->idle.push_back(easy);
    Nack(lease, std::nullopt,
         "libcurl: cannot set up the request: " + std::string(curl_easy_strerror(first_error)));
    return;
  }
  curl_->active.emplace(easy, std::move(t));
  in_flight_.fetch_add(1);
  counters_->posted.fetch_add(1);
}

void PushDispatcher::FinishTransfer(void* easy_handle, int code) {
  CURL* easy = static_cast<CURL*>(easy_handle);
  auto it = curl_->active.find(easy);
  if (it == curl_->active.end()) return;
  std::unique_ptr<PushTransfer> t = std::move(it->second);
  curl_->active.erase(it);
  curl_multi_remove_handle(curl_->multi, easy);
  long status = 0;  // libcurl's type
  curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
  curl_easy_reset(easy);
  curl_->idle.push_back(easy);
  in_flight_.fetch_sub(1);

  const std::string& lease = t->delivery.lease;
  const auto result = static_cast<CURLcode>(code);
  if (result != CURLE_OK) {
    if (!t->refused.empty()) {
      counters_->refused.fetch_add(1);
      Nack(lease, std::nullopt,
           "destination address " + t->refused +
               " is not allowed (private or loopback; see --queue-push-allow)");
    } else if (result == CURLE_OPERATION_TIMEDOUT) {
      Nack(lease, std::nullopt, "timeout after " + std::to_string(options_.timeout_ms) + " ms");
    } else {
      Nack(lease, std::nullopt,
           "request failed: " +
               std::string(t->error[0] != '\0' ? t->error : curl_easy_strerror(result)));
    }
    return;
  }
  std::optional<std::string_view> retry_after;
  if (t->retry_after.has_value()) retry_after = *t->retry_after;
  PushOutcome outcome =
      OutcomeOfHttpStatus(status, retry_after, clock_->NowMs(), options_.max_retry_after_ms);
  if (outcome.ack) {
    acks_.push_back(lease);
  } else {
    Nack(lease, outcome.delay_ms, std::move(outcome.error));
  }
}

void PushDispatcher::Nack(const std::string& lease, std::optional<int64_t> delay_ms,
                          std::string error) {
  SettleRequest request;
  request.kind = SettleKind::kNack;
  request.leases.push_back(lease);
  request.delay_ms = delay_ms;
  request.error = std::move(error);
  counters_->failed.fetch_add(1);
  std::shared_ptr<Counters> counters = counters_;
  settle_(std::move(request), [counters](const Result<std::vector<SettleResult>>& r) {
    if (!r.ok()) counters->settle_errors.fetch_add(1);
  });
}

void PushDispatcher::FlushAcks() {
  for (size_t begin = 0; begin < acks_.size(); begin += kMaxLeasesPerSettle) {
    const size_t end = std::min(acks_.size(), begin + kMaxLeasesPerSettle);
    SettleRequest request;
    request.kind = SettleKind::kAck;
    request.leases.assign(std::make_move_iterator(acks_.begin() + static_cast<ptrdiff_t>(begin)),
                          std::make_move_iterator(acks_.begin() + static_cast<ptrdiff_t>(end)));
    counters_->acked.fetch_add(request.leases.size());
    std::shared_ptr<Counters> counters = counters_;
    settle_(std::move(request), [counters](const Result<std::vector<SettleResult>>& r) {
      if (!r.ok()) counters->settle_errors.fetch_add(1);
    });
  }
  acks_.clear();
}

}  // namespace kvc::queue
