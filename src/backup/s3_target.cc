#include "backup/s3_target.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <utility>

#include "backup/s3_xml.h"
#include "common/random.h"

namespace kvc::backup {

// What one request sends and receives; libcurl's callbacks see it through their userdata.
struct S3Transfer {
  enum class Kind { kGetObject, kPutObject, kDeleteObject, kList };
  Kind kind = Kind::kGetObject;
  std::string url;
  std::string what;  // "GET s3://bucket/key", for messages

  // PUT body: `body`, or `body_size` bytes of the file `body_fd` (named `body_path`).
  std::string_view body;
  int body_fd = -1;
  std::string body_path;
  int64_t body_size = 0;
  std::string sha256_hex;  // of the body; the empty body's for GET and DELETE
  std::string md5_base64;  // PUT only

  // Where a 2xx answer's body goes: `out`, or the file `out_fd` (named `out_path`), or
  // nowhere.
  std::string* out = nullptr;
  int out_fd = -1;
  std::string out_path;

  // Filled while the request runs.
  CURL* curl = nullptr;
  int64_t sent = 0;
  int64_t received = 0;    // bytes of a 2xx answer's body
  std::string error_body;  // a non-2xx answer's body, capped
  Status local_error;      // a local file that failed in a callback
};

namespace {

// A PUT/GET body never ends up here; error bodies are short.
constexpr size_t kMaxErrorBody = 64 * 1024;
// Idle handles kept for reuse (with their connections).
constexpr size_t kMaxIdleHandles = 8;
// Local file reads go through a buffer of this size.
constexpr size_t kReadBufferBytes = 1 << 20;
// SHA-256 of the empty string (GET, DELETE, list).
constexpr std::string_view kEmptySha256 =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

void InitCurlOnce() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

Status FileError(std::string_view what, const std::string& path, int err) {
  return IoError(std::string(what) + " " + path + ": " + std::strerror(err));
}

// SHA-256 (hex) and MD5 (base64) of a body fed in pieces.
class Digests {
 public:
  Digests() : sha256_(EVP_MD_CTX_new()), md5_(EVP_MD_CTX_new()) {
    ok_ = sha256_ != nullptr && md5_ != nullptr &&
          EVP_DigestInit_ex(sha256_, EVP_sha256(), nullptr) == 1 &&
          EVP_DigestInit_ex(md5_, EVP_md5(), nullptr) == 1;
  }
  ~Digests() {
    EVP_MD_CTX_free(sha256_);
    EVP_MD_CTX_free(md5_);
  }
  Digests(const Digests&) = delete;
  Digests& operator=(const Digests&) = delete;

  void Update(std::string_view data) {
    ok_ = ok_ && EVP_DigestUpdate(sha256_, data.data(), data.size()) == 1 &&
          EVP_DigestUpdate(md5_, data.data(), data.size()) == 1;
  }

  Status Finish(std::string* sha256_hex, std::string* md5_base64) {
    unsigned char sha[EVP_MAX_MD_SIZE];
    unsigned char md5[EVP_MAX_MD_SIZE];
    unsigned int sha_len = 0;
    unsigned int md5_len = 0;
    ok_ = ok_ && EVP_DigestFinal_ex(sha256_, sha, &sha_len) == 1 &&
          EVP_DigestFinal_ex(md5_, md5, &md5_len) == 1;
    if (!ok_) return Internal("OpenSSL cannot compute SHA-256/MD5");
    *sha256_hex = HexEncode(std::string(reinterpret_cast<const char*>(sha), sha_len));
    std::string b64(4 * ((md5_len + 2) / 3) + 1, '\0');
    const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(b64.data()), md5,
                                  static_cast<int>(md5_len));
    b64.resize(static_cast<size_t>(n));
    *md5_base64 = std::move(b64);
    return Status::Ok();
  }

 private:
  EVP_MD_CTX* sha256_;
  EVP_MD_CTX* md5_;
  bool ok_ = false;
};

// Closes a file descriptor when it goes out of scope.
struct ClosesFd {
  int fd;
  ~ClosesFd() { ::close(fd); }
};

// A list of request headers for libcurl.
class HeaderList {
 public:
  HeaderList() = default;
  ~HeaderList() { curl_slist_free_all(list_); }
  HeaderList(const HeaderList&) = delete;
  HeaderList& operator=(const HeaderList&) = delete;
  // Returns false if out of memory.
  bool Add(const std::string& line) {
    curl_slist* list = curl_slist_append(list_, line.c_str());
    if (list == nullptr) return false;
    list_ = list;
    return true;
  }
  curl_slist* get() const { return list_; }

 private:
  curl_slist* list_ = nullptr;
};

// Reads up to `n` bytes at `offset`; fewer only at end of file.
Result<size_t> ReadAt(int fd, char* buffer, size_t n, int64_t offset, const std::string& path) {
  size_t done = 0;
  while (done < n) {
    const ssize_t r = ::pread(fd, buffer + done, n - done, static_cast<off_t>(offset + done));
    if (r < 0) {
      if (errno == EINTR) continue;
      return FileError("cannot read", path, errno);
    }
    if (r == 0) break;
    done += static_cast<size_t>(r);
  }
  return done;
}

size_t OnWrite(char* data, size_t size, size_t nmemb, void* userdata) {
  auto* t = static_cast<S3Transfer*>(userdata);
  const size_t n = size * nmemb;
  long status = 0;  // libcurl's type
  curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &status);
  if (status < 200 || status >= 300) {
    const size_t room =
        t->error_body.size() < kMaxErrorBody ? kMaxErrorBody - t->error_body.size() : 0;
    t->error_body.append(data, std::min(n, room));
    return n;
  }
  if (t->out != nullptr) {
    t->out->append(data, n);
  } else if (t->out_fd >= 0) {
    size_t done = 0;
    while (done < n) {
      const ssize_t w = ::write(t->out_fd, data + done, n - done);
      if (w < 0) {
        if (errno == EINTR) continue;
        t->local_error = FileError("cannot write", t->out_path, errno);
        return 0;  // aborts the transfer
      }
      done += static_cast<size_t>(w);
    }
  }
  t->received += static_cast<int64_t>(n);
  return n;
}

size_t OnRead(char* buffer, size_t size, size_t nitems, void* userdata) {
  auto* t = static_cast<S3Transfer*>(userdata);
  const size_t want =
      std::min(size * nitems, static_cast<size_t>(std::max<int64_t>(0, t->body_size - t->sent)));
  if (want == 0) return 0;
  if (t->body_fd < 0) {
    std::memcpy(buffer, t->body.data() + t->sent, want);
    t->sent += static_cast<int64_t>(want);
    return want;
  }
  auto n = ReadAt(t->body_fd, buffer, want, t->sent, t->body_path);
  if (!n.ok()) {
    t->local_error = n.status();
    return CURL_READFUNC_ABORT;
  }
  if (*n == 0) {
    t->local_error = IoError("file " + t->body_path + " became shorter while being uploaded");
    return CURL_READFUNC_ABORT;
  }
  t->sent += static_cast<int64_t>(*n);
  return *n;
}

// libcurl rewinds the body when it must send it again (e.g. on a reused connection that
// turned out closed).
int OnSeek(void* userdata, curl_off_t offset, int origin) {
  auto* t = static_cast<S3Transfer*>(userdata);
  if (origin != SEEK_SET || offset < 0 || offset > t->body_size) return CURL_SEEKFUNC_FAIL;
  t->sent = offset;
  return CURL_SEEKFUNC_OK;
}

Status CurlError(CURLcode code, const char* error_buffer, const std::string& what) {
  const std::string message =
      "S3 " + what + ": " + (error_buffer[0] != '\0' ? error_buffer : curl_easy_strerror(code));
  switch (code) {
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_WEIRD_SERVER_REPLY:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_UPLOAD_FAILED:
    case CURLE_SSL_CONNECT_ERROR:
    // A certificate problem: fixed outside this process, after which a retry succeeds.
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_AGAIN:
      return Unavailable(message);
    case CURLE_URL_MALFORMAT:
    case CURLE_UNSUPPORTED_PROTOCOL:
      return InvalidArgument(message);
    default:
      return Internal(message);
  }
}

// S3 error codes a retry may get past (besides HTTP 5xx and 429).
bool IsTransientS3Code(const std::string& code) {
  return code == "SlowDown" || code == "RequestTimeout" || code == "IncompleteBody" ||
         code == "BadDigest" || code == "XAmzContentSHA256Mismatch" || code == "InternalError" ||
         code == "ServiceUnavailable";
}

// The Status of a non-2xx answer. Delete of a missing key is OK.
Status HttpError(long status, const S3Transfer& t) {
  S3ErrorBody error;
  if (!t.error_body.empty()) {
    auto parsed = ParseS3Error(t.error_body);
    if (parsed.ok()) error = std::move(parsed).value();
  }
  std::string message = "S3 " + t.what + ": HTTP " + std::to_string(status);
  if (!error.code.empty()) message += " " + error.code;
  if (!error.message.empty()) message += ": " + error.message;
  if (status == 404 && (error.code == "NoSuchKey" || error.code.empty())) {
    if (t.kind == S3Transfer::Kind::kDeleteObject) return Status::Ok();
    if (t.kind == S3Transfer::Kind::kGetObject) return NotFound(message);
  }
  if (status == 401 || status == 403) return PermissionDenied(message);
  if (status >= 500 || status == 429 || IsTransientS3Code(error.code)) {
    return Unavailable(message);
  }
  return InvalidArgument(message);
}

// Sets libcurl options, remembering the first failure.
class Options {
 public:
  explicit Options(CURL* curl) : curl_(curl) {}
  template <typename T>
  void Set(CURLoption option, T value) {
    const CURLcode code = curl_easy_setopt(curl_, option, value);
    if (code != CURLE_OK && first_error_ == CURLE_OK) first_error_ = code;
  }
  CURLcode first_error() const { return first_error_; }

 private:
  CURL* curl_;
  CURLcode first_error_ = CURLE_OK;
};

bool IsPrintableAscii(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c > ' ' && c < 0x7f; });
}

bool IsValidBucket(std::string_view b) {
  if (b.size() < 3 || b.size() > 63) return false;
  const auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!alnum(b.front()) || !alnum(b.back())) return false;
  return std::all_of(b.begin(), b.end(), [&](char c) { return alnum(c) || c == '.' || c == '-'; });
}

bool IsValidPrefix(std::string_view p) {
  if (p.empty()) return true;
  size_t start = 0;
  for (;;) {
    const size_t slash = p.find('/', start);
    const std::string_view segment =
        p.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    if (segment.empty() || segment == "." || segment == "..") return false;
    for (char c : segment) {
      const auto byte = static_cast<unsigned char>(c);
      if (byte < 0x20 || byte == 0x7f) return false;
    }
    if (slash == std::string_view::npos) return true;
    start = slash + 1;
  }
}

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? "" : value;
}

}  // namespace

std::string S3UriEncode(std::string_view s, bool keep_slash) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    const bool unreserved = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                            (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' || c == '~';
    if (unreserved || (keep_slash && c == '/')) {
      out.push_back(c);
    } else {
      const auto byte = static_cast<unsigned char>(c);
      out.push_back('%');
      out.push_back(kHex[byte >> 4]);
      out.push_back(kHex[byte & 0xF]);
    }
  }
  return out;
}

Result<S3Config> S3ConfigFromUrl(const std::string& url) {
  constexpr std::string_view kScheme = "s3://";
  if (url.compare(0, kScheme.size(), kScheme) != 0) {
    return InvalidArgument("not an s3:// URL: " + url);
  }
  S3Config config;
  const std::string rest = url.substr(kScheme.size());
  const size_t slash = rest.find('/');
  config.bucket = rest.substr(0, slash);
  if (slash != std::string::npos) config.prefix = rest.substr(slash + 1);
  while (!config.prefix.empty() && config.prefix.back() == '/') config.prefix.pop_back();
  if (!IsValidBucket(config.bucket)) {
    return InvalidArgument("invalid S3 bucket name in " + url + " (3 to 63 of a-z, 0-9, '.', '-')");
  }
  if (!IsValidPrefix(config.prefix)) {
    return InvalidArgument("invalid S3 prefix in " + url +
                           " (empty, '.' or '..' segment, or a control character)");
  }

  config.access_key_id = Env("AWS_ACCESS_KEY_ID");
  config.secret_access_key = Env("AWS_SECRET_ACCESS_KEY");
  config.session_token = Env("AWS_SESSION_TOKEN");
  if (config.access_key_id.empty() || config.secret_access_key.empty()) {
    return InvalidArgument(
        "an s3:// backup target needs AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY");
  }
  // The key id is written into the Authorization header, the token into a header of its own.
  if (!IsPrintableAscii(config.access_key_id) ||
      config.access_key_id.find_first_of("/,") != std::string::npos) {
    return InvalidArgument("AWS_ACCESS_KEY_ID holds characters an access key id cannot have");
  }
  if (!IsPrintableAscii(config.session_token)) {
    return InvalidArgument("AWS_SESSION_TOKEN holds characters a session token cannot have");
  }

  config.region = Env("AWS_REGION");
  if (config.region.empty()) config.region = Env("AWS_DEFAULT_REGION");
  if (config.region.empty()) config.region = "us-east-1";
  if (!std::all_of(config.region.begin(), config.region.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
      })) {
    return InvalidArgument("invalid AWS region: " + config.region);
  }

  std::string endpoint = Env("AWS_ENDPOINT_URL_S3");
  if (endpoint.empty()) endpoint = Env("AWS_ENDPOINT_URL");
  if (endpoint.empty()) {
    config.endpoint = "https://s3." + config.region + ".amazonaws.com";
    config.path_style = config.bucket.find('.') != std::string::npos;
    return config;
  }
  while (!endpoint.empty() && endpoint.back() == '/') endpoint.pop_back();
  size_t host_start = 0;
  if (endpoint.compare(0, 7, "http://") == 0) {
    host_start = 7;
  } else if (endpoint.compare(0, 8, "https://") == 0) {
    host_start = 8;
  }
  const std::string host = endpoint.substr(host_start);
  if (host_start == 0 || host.empty() || !IsPrintableAscii(host) ||
      host.find_first_of("/?#@") != std::string::npos) {
    return InvalidArgument("invalid S3 endpoint URL (http(s)://host[:port]): " + endpoint);
  }
  config.endpoint = endpoint;
  config.path_style = true;
  return config;
}

struct S3Target::EasyHandle {
  explicit EasyHandle(CURL* c) : curl(c) {}
  ~EasyHandle() { curl_easy_cleanup(curl); }
  EasyHandle(const EasyHandle&) = delete;
  EasyHandle& operator=(const EasyHandle&) = delete;
  CURL* curl;
};

namespace {

std::string BaseUrl(const S3Config& config) {
  if (config.path_style) return config.endpoint + "/" + config.bucket;
  return "https://" + config.bucket + ".s3." + config.region + ".amazonaws.com";
}

}  // namespace

S3Target::S3Target(S3Config config, TargetOptions options)
    : config_(std::move(config)),
      options_(options),
      sigv4_("aws:amz:" + config_.region + ":s3"),
      base_url_(BaseUrl(config_)) {
  InitCurlOnce();
}

S3Target::~S3Target() = default;

std::string S3Target::Describe() const {
  return "s3://" + config_.bucket + (config_.prefix.empty() ? "" : "/" + config_.prefix) + " (" +
         config_.endpoint + ")";
}

std::string S3Target::Key(const std::string& name) const {
  return config_.prefix.empty() ? name : config_.prefix + "/" + name;
}

std::string S3Target::ObjectUrl(const std::string& name) const {
  return base_url_ + "/" + S3UriEncode(Key(name), /*keep_slash=*/true);
}

std::string S3Target::Where(const std::string& name) const {
  return "s3://" + config_.bucket + "/" + Key(name);
}

void S3Target::Address(const std::string& name, std::string_view detail, S3Transfer* t) const {
  const char* verb = t->kind == S3Transfer::Kind::kPutObject      ? "PUT "
                     : t->kind == S3Transfer::Kind::kDeleteObject ? "DELETE "
                                                                  : "GET ";
  t->url = ObjectUrl(name);
  t->what = verb + Where(name) + std::string(detail);
  if (t->kind != S3Transfer::Kind::kPutObject) t->sha256_hex = kEmptySha256;
}

Result<std::unique_ptr<S3Target::EasyHandle>> S3Target::Acquire() {
  {
    MutexLock lock(mu_);
    if (!idle_.empty()) {
      std::unique_ptr<EasyHandle> handle = std::move(idle_.back());
      idle_.pop_back();
      return handle;
    }
  }
  CURL* curl = curl_easy_init();
  if (curl == nullptr) return Internal("libcurl: cannot create a handle");
  return std::make_unique<EasyHandle>(curl);
}

void S3Target::Release(std::unique_ptr<EasyHandle> handle) {
  // Forget the options (they point into the finished request); connections stay.
  curl_easy_reset(handle->curl);
  MutexLock lock(mu_);
  if (idle_.size() < kMaxIdleHandles) idle_.push_back(std::move(handle));
}

Status S3Target::Perform(S3Transfer& t) {
  KVC_ASSIGN_OR_RETURN(std::unique_ptr<EasyHandle> handle, Acquire());
  CURL* curl = handle->curl;
  t.curl = curl;

  // libcurl 7.88 signs every header set here (so none may be empty, like "Expect:", which
  // it would sign but not send), and it needs the payload hash from us for S3.
  HeaderList headers;
  bool headers_ok = headers.Add("x-amz-content-sha256: " + t.sha256_hex);
  if (!t.md5_base64.empty()) headers_ok = headers_ok && headers.Add("Content-MD5: " + t.md5_base64);
  if (!config_.session_token.empty()) {
    headers_ok = headers_ok && headers.Add("x-amz-security-token: " + config_.session_token);
  }
  if (!headers_ok) {
    Release(std::move(handle));
    return Internal("libcurl: out of memory");
  }

  char error_buffer[CURL_ERROR_SIZE] = {};
  Options opt(curl);
  opt.Set(CURLOPT_URL, t.url.c_str());
  opt.Set(CURLOPT_PROTOCOLS_STR, "http,https");
  opt.Set(CURLOPT_PATH_AS_IS, 1L);  // the path is already in canonical form
  opt.Set(CURLOPT_NOSIGNAL, 1L);    // several threads; timeouts without SIGALRM
  opt.Set(CURLOPT_ERRORBUFFER, error_buffer);
  opt.Set(CURLOPT_AWS_SIGV4, sigv4_.c_str());
  opt.Set(CURLOPT_USERNAME, config_.access_key_id.c_str());
  opt.Set(CURLOPT_PASSWORD, config_.secret_access_key.c_str());
  opt.Set(CURLOPT_HTTPHEADER, headers.get());
  opt.Set(CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(options_.connect_timeout_ms));
  opt.Set(CURLOPT_TIMEOUT_MS, static_cast<long>(options_.request_timeout_ms));
  opt.Set(CURLOPT_LOW_SPEED_LIMIT, static_cast<long>(options_.low_speed_bytes_per_s));
  opt.Set(CURLOPT_LOW_SPEED_TIME, static_cast<long>(options_.low_speed_window_s));
  opt.Set(CURLOPT_WRITEFUNCTION, OnWrite);
  opt.Set(CURLOPT_WRITEDATA, &t);
  if (t.kind == S3Transfer::Kind::kPutObject) {
    opt.Set(CURLOPT_UPLOAD, 1L);
    opt.Set(CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(t.body_size));
    opt.Set(CURLOPT_READFUNCTION, OnRead);
    opt.Set(CURLOPT_READDATA, &t);
    opt.Set(CURLOPT_SEEKFUNCTION, OnSeek);
    opt.Set(CURLOPT_SEEKDATA, &t);
  } else if (t.kind == S3Transfer::Kind::kDeleteObject) {
    opt.Set(CURLOPT_CUSTOMREQUEST, "DELETE");
  }
  if (opt.first_error() != CURLE_OK) {
    Release(std::move(handle));
    return Internal("libcurl: cannot set an option: " +
                    std::string(curl_easy_strerror(opt.first_error())));
  }

  const CURLcode code = curl_easy_perform(curl);
  long status = 0;  // libcurl's type
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  curl_off_t content_length = -1;
  curl_easy_getinfo(curl, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &content_length);
  Release(std::move(handle));

  if (code != CURLE_OK) {
    if (!t.local_error.ok()) return t.local_error;
    return CurlError(code, error_buffer, t.what);
  }
  if (status < 200 || status >= 300) return HttpError(status, t);
  // libcurl already fails a body cut short of its Content-Length; this also holds if the
  // answer was framed some other way.
  if (t.kind == S3Transfer::Kind::kGetObject && content_length >= 0 &&
      content_length != t.received) {
    return Unavailable("S3 " + t.what + ": received " + std::to_string(t.received) + " of " +
                       std::to_string(content_length) + " bytes");
  }
  return Status::Ok();
}

Status S3Target::Put(const std::string& name, std::string_view data) {
  if (!IsValidObjectName(name)) return InvalidArgument("invalid backup object name: " + name);
  S3Transfer t;
  t.kind = S3Transfer::Kind::kPutObject;
  Address(name, "", &t);
  t.body = data;
  t.body_size = static_cast<int64_t>(data.size());
  Digests digests;
  digests.Update(data);
  KVC_RETURN_IF_ERROR(digests.Finish(&t.sha256_hex, &t.md5_base64));
  return Perform(t);
}

Status S3Target::PutFile(const std::string& name, const std::string& path) {
  if (!IsValidObjectName(name)) return InvalidArgument("invalid backup object name: " + name);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return FileError("cannot open", path, errno);
  const ClosesFd closer{fd};
  S3Transfer t;
  t.kind = S3Transfer::Kind::kPutObject;
  Address(name, " from " + path, &t);
  t.body_fd = fd;
  t.body_path = path;
  // First pass: the digests and the size the request announces.
  Digests digests;
  std::string buffer(kReadBufferBytes, '\0');
  for (;;) {
    KVC_ASSIGN_OR_RETURN(const size_t n,
                         ReadAt(fd, buffer.data(), buffer.size(), t.body_size, path));
    if (n == 0) break;
    digests.Update(std::string_view(buffer.data(), n));
    t.body_size += static_cast<int64_t>(n);
  }
  KVC_RETURN_IF_ERROR(digests.Finish(&t.sha256_hex, &t.md5_base64));
  return Perform(t);
}

Result<std::string> S3Target::Get(const std::string& name) {
  if (!IsValidObjectName(name)) return InvalidArgument("invalid backup object name: " + name);
  std::string out;
  S3Transfer t;
  t.kind = S3Transfer::Kind::kGetObject;
  Address(name, "", &t);
  t.out = &out;
  KVC_RETURN_IF_ERROR(Perform(t));
  return out;
}

Status S3Target::GetFile(const std::string& name, const std::string& path) {
  if (!IsValidObjectName(name)) return InvalidArgument("invalid backup object name: " + name);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return FileError("cannot create", path, errno);
  S3Transfer t;
  t.kind = S3Transfer::Kind::kGetObject;
  Address(name, " to " + path, &t);
  t.out_fd = fd;
  t.out_path = path;
  Status status = Perform(t);
  if (::close(fd) != 0 && status.ok()) status = FileError("cannot close", path, errno);
  return status;
}

Status S3Target::Delete(const std::string& name) {
  if (!IsValidObjectName(name)) return InvalidArgument("invalid backup object name: " + name);
  S3Transfer t;
  t.kind = S3Transfer::Kind::kDeleteObject;
  Address(name, "", &t);
  return Perform(t);
}

Result<std::vector<ObjectInfo>> S3Target::List(const std::string& prefix) {
  return ListPaged(prefix, kMaxListPage);
}

Result<std::vector<ObjectInfo>> S3Target::ListPaged(const std::string& prefix, int max_keys) {
  if (max_keys < 1 || max_keys > kMaxListPage) {
    return InvalidArgument("max_keys must be 1 to " + std::to_string(kMaxListPage));
  }
  const std::string base = config_.prefix.empty() ? "" : config_.prefix + "/";
  const std::string key_prefix = base + prefix;
  std::vector<ObjectInfo> out;
  std::string token;
  for (;;) {
    // Parameters sorted by name, values encoded: SigV4's canonical query string, which
    // libcurl 7.88 signs as written.
    std::string query;
    if (!token.empty()) query += "continuation-token=" + S3UriEncode(token, false) + "&";
    query += "list-type=2&max-keys=" + std::to_string(max_keys) +
             "&prefix=" + S3UriEncode(key_prefix, false);
    std::string body;
    S3Transfer t;
    t.kind = S3Transfer::Kind::kList;
    t.url = base_url_ + (config_.path_style ? "?" : "/?") + query;
    t.what = "LIST s3://" + config_.bucket + "/" + key_prefix;
    t.sha256_hex = kEmptySha256;
    t.out = &body;
    KVC_RETURN_IF_ERROR(Perform(t));
    auto page = ParseListObjectsV2(body);
    if (!page.ok()) return Corruption(t.what + ": " + page.status().message());
    for (ObjectInfo& object : page->objects) {
      if (object.name.compare(0, key_prefix.size(), key_prefix) != 0) {
        return Corruption(t.what + ": listed key " + object.name + " lacks the prefix");
      }
      object.name.erase(0, base.size());
      if (IsValidObjectName(object.name)) out.push_back(std::move(object));
    }
    if (!page->is_truncated) break;
    if (page->next_continuation_token == token) {
      return Corruption(t.what + ": the same continuation token twice");
    }
    token = std::move(page->next_continuation_token);
  }
  std::sort(out.begin(), out.end(),
            [](const ObjectInfo& a, const ObjectInfo& b) { return a.name < b.name; });
  return out;
}

}  // namespace kvc::backup
