// The S3 backup target against an S3 stand-in the test starts itself (testutil/s3_fixture.h:
// s3rver, which checks SigV4 signatures, plus S3's whole-body and digest checks on PUT), opened
// with OpenTarget("s3://kvc-test/PREFIX") and the AWS_* environment, directly or through a
// fault-injecting TCP proxy (testutil/fault_proxy.h).
//
// If the stand-in is not installed every test here fails, saying to run `npm ci` in tests/e2e.
#include "backup/s3_target.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "backup/target.h"
#include "testutil/closed_port.h"
#include "testutil/fault_proxy.h"
#include "testutil/s3_fixture.h"

namespace kvc::backup {
namespace {

namespace fs = std::filesystem;
using testutil::FaultProxy;
using testutil::ProxyFault;
using testutil::ProxyPlan;
using testutil::S3Fixture;

std::string AllByteValues(int copies) {
  std::string s;
  for (int i = 0; i < copies; ++i) {
    for (int b = 0; b < 256; ++b) s.push_back(static_cast<char>(b));
  }
  return s;
}

std::string RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void WriteFile(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << data;
}

// The value, or the error as text (so a failed read fails the comparison instead of throwing).
std::string Text(const Result<std::string>& result) {
  return result.ok() ? *result : "<error: " + result.status().ToString() + ">";
}

// Compares byte strings without printing them (they are large and binary).
::testing::AssertionResult SameBytes(const Result<std::string>& got, const std::string& want) {
  if (!got.ok()) return ::testing::AssertionFailure() << got.status().ToString();
  if (*got == want) return ::testing::AssertionSuccess();
  size_t i = 0;
  while (i < got->size() && i < want.size() && (*got)[i] == want[i]) ++i;
  return ::testing::AssertionFailure() << "got " << got->size() << " bytes, want " << want.size()
                                       << "; they differ from offset " << i;
}

std::vector<std::string> Names(const std::vector<ObjectInfo>& objects) {
  std::vector<std::string> names;
  names.reserve(objects.size());
  for (const ObjectInfo& o : objects) names.push_back(o.name);
  return names;
}

size_t Count(const std::string& haystack, const std::string& needle) {
  size_t n = 0;
  for (size_t i = haystack.find(needle); i != std::string::npos; i = haystack.find(needle, i + 1)) {
    ++n;
  }
  return n;
}

class S3TargetTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto fixture = S3Fixture::Start();
    if (fixture.ok()) {
      fixture_ = std::move(fixture).value();
    } else {
      start_error_ = fixture.status();
    }
  }
  static void TearDownTestSuite() { fixture_.reset(); }

  void SetUp() override {
    ASSERT_NE(fixture_, nullptr) << start_error_.ToString();
    fixture_->SetEnvironment();
    std::string tmpl = (fs::temp_directory_path() / "kvc-s3-test-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    tmp_ = tmpl;
  }
  void TearDown() override {
    if (!tmp_.empty()) fs::remove_all(tmp_);
    if (fixture_ != nullptr && HasFailure()) {
      std::cerr << "S3 stand-in log:\n" << fixture_->Log() << "\n";
    }
  }

  // OpenTarget("s3://kvc-test/PREFIX") with the environment as it is now.
  static std::unique_ptr<Target> Open(const std::string& prefix,
                                      const TargetOptions& options = TargetOptions()) {
    auto target = OpenTarget(std::string("s3://") + S3Fixture::kBucket + "/" + prefix, options);
    EXPECT_TRUE(target.ok()) << target.status().ToString();
    return target.ok() ? std::move(target).value() : nullptr;
  }

  // The same, reaching the stand-in through `proxy`.
  static std::unique_ptr<Target> OpenVia(const FaultProxy& proxy, const std::string& prefix,
                                         const TargetOptions& options = TargetOptions()) {
    fixture_->SetEnvironment(proxy.endpoint());
    auto target = Open(prefix, options);
    fixture_->SetEnvironment();
    return target;
  }

  static std::unique_ptr<FaultProxy> StartProxy() {
    auto proxy = FaultProxy::Start(fixture_->port());
    EXPECT_TRUE(proxy.ok()) << proxy.status().ToString();
    return proxy.ok() ? std::move(proxy).value() : nullptr;
  }

  // Where the stand-in keeps object KEY (s3rver's file layout).
  static std::string StoredFile(const std::string& key) {
    const fs::path path = fs::path(fixture_->data_dir()) / S3Fixture::kBucket / key;
    return (path.parent_path() / (path.filename().string() + "._S3rver_object")).string();
  }

  inline static std::unique_ptr<S3Fixture> fixture_;
  inline static Status start_error_;
  std::string tmp_;
};

TEST_F(S3TargetTest, PutGetBinaryDataWithAllByteValues) {
  auto target = Open("roundtrip");
  ASSERT_NE(target, nullptr);
  const std::string data = AllByteValues(64) + "\r\n\r\n" + AllByteValues(1);
  ASSERT_TRUE(target->Put("bin/all-bytes", data).ok());
  auto got = target->Get("bin/all-bytes");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(SameBytes(got, data));
  // Stored under PREFIX/NAME, byte for byte.
  EXPECT_TRUE(SameBytes(ReadFile(StoredFile("roundtrip/bin/all-bytes")), data));

  ASSERT_TRUE(target->Put("bin/empty", "").ok());
  got = target->Get("bin/empty");
  EXPECT_EQ(Text(got), "");
}

TEST_F(S3TargetTest, PutFileAndGetFileStreamLargeObjects) {
  auto target = Open("files");
  ASSERT_NE(target, nullptr);
  const std::string data = RandomBytes((3 << 20) + 123, 1);
  const std::string src = tmp_ + "/src.bin";
  const std::string dst = tmp_ + "/dst.bin";
  WriteFile(src, data);
  ASSERT_TRUE(target->PutFile("snap/big.bin", src).ok());
  WriteFile(dst, std::string(5 << 20, 'z'));  // GetFile truncates what was there
  const Status got = target->GetFile("snap/big.bin", dst);
  ASSERT_TRUE(got.ok()) << got.ToString();
  EXPECT_TRUE(SameBytes(ReadFile(dst), data));
  EXPECT_TRUE(SameBytes(target->Get("snap/big.bin"), data));
  auto list = target->List("snap/");
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  ASSERT_EQ(list->size(), 1U);
  EXPECT_EQ((*list)[0].size, static_cast<int64_t>(data.size()));

  WriteFile(src, "");
  ASSERT_TRUE(target->PutFile("snap/empty.bin", src).ok());
  EXPECT_EQ(Text(target->Get("snap/empty.bin")), "");
  EXPECT_EQ(target->PutFile("snap/x", tmp_ + "/missing").code(), StatusCode::kIoError);
  EXPECT_EQ(target->GetFile("snap/big.bin", tmp_ + "/no/such/dir").code(), StatusCode::kIoError);
}

TEST_F(S3TargetTest, ReplaceDeleteAndNotFound) {
  auto target = Open("replace");
  ASSERT_NE(target, nullptr);
  ASSERT_TRUE(target->Put("obj", "first version").ok());
  ASSERT_TRUE(target->Put("obj", "second").ok());
  EXPECT_EQ(Text(target->Get("obj")), "second");
  ASSERT_TRUE(target->Delete("obj").ok());
  EXPECT_EQ(target->Get("obj").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(target->GetFile("obj", tmp_ + "/out").code(), StatusCode::kNotFound);
  EXPECT_TRUE(target->Delete("obj").ok());  // already absent
  EXPECT_TRUE(target->Delete("never/existed").ok());
  for (const char* bad : {"", "../x", "a b", "/abs"}) {
    EXPECT_EQ(target->Put(bad, "x").code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(target->Get(bad).status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST_F(S3TargetTest, ListIsSortedByPrefixAndStaysUnderTheTargetPrefix) {
  auto target = Open("list/a");
  ASSERT_NE(target, nullptr);
  const std::vector<std::string> names = {"snap/2/b", "snap/10", "snap/2/a", "log/0001",
                                          "snapshot", "a",       "snap-x",   "log/0002/x"};
  for (const std::string& name : names) {
    ASSERT_TRUE(target->Put(name, name + "!").ok()) << name;
  }
  // Neighbours that must not show up: a sibling prefix that starts the same way, and keys
  // under the target's prefix that are not object names (put by some other tool).
  auto sibling = Open("list/ab");
  ASSERT_NE(sibling, nullptr);
  ASSERT_TRUE(sibling->Put("snap/zz", "x").ok());
  auto parent = Open("list");
  ASSERT_NE(parent, nullptr);

  auto all = target->List("");
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_EQ(Names(*all), (std::vector<std::string>{"a", "log/0001", "log/0002/x", "snap-x",
                                                   "snap/10", "snap/2/a", "snap/2/b", "snapshot"}));
  for (const ObjectInfo& o : *all) EXPECT_EQ(o.size, static_cast<int64_t>(o.name.size() + 1));
  EXPECT_EQ(Names(*target->List("snap/")),
            (std::vector<std::string>{"snap/10", "snap/2/a", "snap/2/b"}));
  EXPECT_EQ(Names(*target->List("snap/2/")), (std::vector<std::string>{"snap/2/a", "snap/2/b"}));
  EXPECT_TRUE(target->List("zzz")->empty());
  EXPECT_EQ(Names(*parent->List("ab/")), (std::vector<std::string>{"ab/snap/zz"}));
}

TEST_F(S3TargetTest, ListFollowsContinuationTokens) {
  auto proxy = StartProxy();
  ASSERT_NE(proxy, nullptr);
  auto opened = OpenVia(*proxy, "pages");
  ASSERT_NE(opened, nullptr);
  auto* target = dynamic_cast<S3Target*>(opened.get());
  ASSERT_NE(target, nullptr);
  std::vector<std::string> names;
  for (int i = 0; i < 7; ++i) names.push_back("seg/" + std::to_string(1000 + i * 7 % 10));
  for (const std::string& name : names) ASSERT_TRUE(target->Put(name, "x").ok());
  std::sort(names.begin(), names.end());

  auto listed = target->ListPaged("seg/", 2);
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  EXPECT_EQ(Names(*listed), names);
  // Four pages of at most two keys: the first without a token, three with one.
  const std::string requests = proxy->CapturedRequests();
  EXPECT_EQ(Count(requests, "list-type=2&max-keys=2&prefix=pages%2Fseg%2F"), 4U);
  EXPECT_EQ(Count(requests, "?continuation-token="), 3U);

  listed = target->List("seg/");  // one page of up to 1000
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(Names(*listed), names);
}

TEST_F(S3TargetTest, ListMoreThanOneThousandObjects) {
  auto target = Open("thousand");
  ASSERT_NE(target, nullptr);
  std::vector<std::string> names;
  for (int i = 0; i < 1003; ++i) {
    char name[32];
    std::snprintf(name, sizeof name, "o/%05d", i);
    names.emplace_back(name);
  }
  // Written straight into the stand-in's store: 1003 PUTs would take a while.
  for (const std::string& name : names) {
    const std::string file = StoredFile("thousand/" + name);
    fs::create_directories(fs::path(file).parent_path());
    WriteFile(file, name);
  }
  auto listed = target->List("o/");
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  EXPECT_EQ(Names(*listed), names);
  EXPECT_EQ(Text(target->Get(names.back())), names.back());
}

TEST_F(S3TargetTest, KeysWithSpacesAndSpecialCharacters) {
  // Through the whole cycle, List included.
  const std::string prefix = "sp ace+plus=eq@at$,;:~x";
  auto target = Open(prefix);
  ASSERT_NE(target, nullptr);
  ASSERT_TRUE(target->Put("a/b.c", "special").ok());
  EXPECT_EQ(ReadFile(StoredFile(prefix + "/a/b.c")), "special");  // the key, encoded once
  EXPECT_EQ(Text(target->Get("a/b.c")), "special");
  auto listed = target->List("");
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  EXPECT_EQ(Names(*listed), std::vector<std::string>{"a/b.c"});
  ASSERT_TRUE(target->Delete("a/b.c").ok());
  EXPECT_EQ(target->Get("a/b.c").status().code(), StatusCode::kNotFound);

  // Put, Get and Delete only: s3rver's List mishandles these characters (it signs the query
  // with encodeURIComponent, which leaves !'()* alone, and escapes & and ' twice in its XML).
  const std::string odd = "q&'!()*[]%20";
  auto odd_target = Open(odd);
  ASSERT_NE(odd_target, nullptr);
  ASSERT_TRUE(odd_target->Put("obj", "odd").ok());
  EXPECT_EQ(ReadFile(StoredFile(odd + "/obj")), "odd");
  EXPECT_EQ(Text(odd_target->Get("obj")), "odd");
  ASSERT_TRUE(odd_target->Delete("obj").ok());
  EXPECT_FALSE(fs::exists(StoredFile(odd + "/obj")));
}

TEST_F(S3TargetTest, WrongCredentialsArePermissionDenied) {
  auto good = Open("creds");
  ASSERT_NE(good, nullptr);
  ASSERT_TRUE(good->Put("kept", "original").ok());

  ::setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret", 1);
  auto wrong = Open("creds");
  ASSERT_NE(wrong, nullptr);
  const Status put = wrong->Put("kept", "overwritten");
  EXPECT_EQ(put.code(), StatusCode::kPermissionDenied) << put.ToString();
  EXPECT_NE(put.message().find("SignatureDoesNotMatch"), std::string::npos) << put.ToString();
  EXPECT_EQ(put.message().find("not-the-secret"), std::string::npos);
  EXPECT_EQ(wrong->Put("fresh", "x").code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(wrong->Get("kept").status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(wrong->GetFile("kept", tmp_ + "/out").code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(wrong->List("").status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(wrong->Delete("kept").code(), StatusCode::kPermissionDenied);

  fixture_->SetEnvironment();
  ::setenv("AWS_ACCESS_KEY_ID", "AKIDUNKNOWN", 1);
  auto unknown = Open("creds");
  ASSERT_NE(unknown, nullptr);
  const Status get = unknown->Get("kept").status();
  EXPECT_EQ(get.code(), StatusCode::kPermissionDenied) << get.ToString();
  EXPECT_NE(get.message().find("InvalidAccessKeyId"), std::string::npos) << get.ToString();

  // Nothing the refused requests carried was stored or removed.
  EXPECT_EQ(Text(good->Get("kept")), "original");
  EXPECT_EQ(good->Get("fresh").status().code(), StatusCode::kNotFound);
}

TEST_F(S3TargetTest, NoSuchBucketIsInvalidArgument) {
  auto target = OpenTarget("s3://no-such-bucket/x", TargetOptions());
  ASSERT_TRUE(target.ok());
  const Status put = (*target)->Put("obj", "x");
  EXPECT_EQ(put.code(), StatusCode::kInvalidArgument) << put.ToString();
  EXPECT_NE(put.message().find("NoSuchBucket"), std::string::npos) << put.ToString();
  EXPECT_EQ((*target)->List("").status().code(), StatusCode::kInvalidArgument);
}

TEST_F(S3TargetTest, DescribeNamesBucketPrefixAndEndpoint) {
  auto target = Open("desc/");
  ASSERT_NE(target, nullptr);
  EXPECT_EQ(target->Describe(), "s3://kvc-test/desc (" + fixture_->endpoint() + ")");
}

TEST_F(S3TargetTest, EndpointNotListeningIsUnavailable) {
  const testutil::ClosedPort closed;
  ASSERT_NE(closed.port(), 0);
  fixture_->SetEnvironment("http://127.0.0.1:" + std::to_string(closed.port()));
  auto target = Open("nowhere");
  ASSERT_NE(target, nullptr);
  const auto start = std::chrono::steady_clock::now();
  const Status put = target->Put("obj", "x");
  EXPECT_EQ(put.code(), StatusCode::kUnavailable) << put.ToString();
  EXPECT_EQ(target->Get("obj").status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(target->List("").status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(target->Delete("obj").code(), StatusCode::kUnavailable);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

TEST_F(S3TargetTest, SlowNetworkHitsTheRequestTimeout) {
  auto direct = Open("slow");
  ASSERT_NE(direct, nullptr);
  const std::string big = RandomBytes(256 << 10, 2);
  ASSERT_TRUE(direct->Put("big", big).ok());
  ASSERT_TRUE(direct->Put("small", "tiny").ok());

  auto proxy = StartProxy();
  ASSERT_NE(proxy, nullptr);
  proxy->SetPlan(ProxyPlan{ProxyFault::kSlow, 0, 1024, 20});  // about 50 KB/s
  TargetOptions options;
  options.request_timeout_ms = 1500;
  auto slow = OpenVia(*proxy, "slow", options);
  ASSERT_NE(slow, nullptr);
  // A small request gets through the slow link in time...
  auto small = slow->Get("small");
  ASSERT_TRUE(small.ok()) << small.status().ToString();
  EXPECT_EQ(Text(small), "tiny");
  // ...a large one does not.
  auto start = std::chrono::steady_clock::now();
  auto got = slow->Get("big");
  EXPECT_EQ(got.status().code(), StatusCode::kUnavailable) << got.status().ToString();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  start = std::chrono::steady_clock::now();
  const Status put = slow->Put("big", RandomBytes(256 << 10, 3));
  EXPECT_EQ(put.code(), StatusCode::kUnavailable) << put.ToString();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_TRUE(SameBytes(direct->Get("big"), big));
}

TEST_F(S3TargetTest, ConnectionCutDuringPutLeavesNoPartialObject) {
  auto direct = Open("cutput");
  ASSERT_NE(direct, nullptr);
  const std::string old_data = RandomBytes(1 << 20, 4);
  ASSERT_TRUE(direct->Put("existing", old_data).ok());

  auto proxy = StartProxy();
  ASSERT_NE(proxy, nullptr);
  // Past the request headers, in the middle of the 1 MiB body.
  proxy->SetPlan(ProxyPlan{ProxyFault::kCutRequest, 300 << 10});
  auto cut = OpenVia(*proxy, "cutput");
  ASSERT_NE(cut, nullptr);

  Status put = cut->Put("existing", RandomBytes(1 << 20, 5));
  EXPECT_EQ(put.code(), StatusCode::kUnavailable) << put.ToString();
  put = cut->Put("fresh", RandomBytes(1 << 20, 6));
  EXPECT_EQ(put.code(), StatusCode::kUnavailable) << put.ToString();
  const std::string src = tmp_ + "/src.bin";
  WriteFile(src, RandomBytes(1 << 20, 7));
  put = cut->PutFile("fresh-file", src);
  EXPECT_EQ(put.code(), StatusCode::kUnavailable) << put.ToString();
  EXPECT_EQ(proxy->faults_injected(), 3);

  // Give the stand-in a moment to finish whatever it does with the cut requests.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_TRUE(SameBytes(direct->Get("existing"), old_data));
  EXPECT_EQ(direct->Get("fresh").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(direct->Get("fresh-file").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(Names(*direct->List("")), std::vector<std::string>{"existing"});
}

TEST_F(S3TargetTest, ConnectionCutDuringGetIsUnavailableNeverPartial) {
  auto direct = Open("cutget");
  ASSERT_NE(direct, nullptr);
  const std::string data = RandomBytes(1 << 20, 8);
  ASSERT_TRUE(direct->Put("obj", data).ok());

  auto proxy = StartProxy();
  ASSERT_NE(proxy, nullptr);
  proxy->SetPlan(ProxyPlan{ProxyFault::kCutResponse, 300 << 10});
  auto cut = OpenVia(*proxy, "cutget");
  ASSERT_NE(cut, nullptr);
  auto got = cut->Get("obj");
  EXPECT_EQ(got.status().code(), StatusCode::kUnavailable)
      << (got.ok() ? "got " + std::to_string(got->size()) + " bytes" : got.status().ToString());
  const Status file = cut->GetFile("obj", tmp_ + "/out.bin");
  EXPECT_EQ(file.code(), StatusCode::kUnavailable) << file.ToString();
  EXPECT_EQ(proxy->faults_injected(), 2);
  EXPECT_TRUE(SameBytes(direct->Get("obj"), data));
}

TEST_F(S3TargetTest, BodyAlteredInTransitIsRefused) {
  auto direct = Open("flip");
  ASSERT_NE(direct, nullptr);
  const std::string old_data = RandomBytes(256 << 10, 9);
  ASSERT_TRUE(direct->Put("obj", old_data).ok());

  auto proxy = StartProxy();
  ASSERT_NE(proxy, nullptr);
  proxy->SetPlan(ProxyPlan{ProxyFault::kFlipRequestByte, 100 << 10});
  auto flip = OpenVia(*proxy, "flip");
  ASSERT_NE(flip, nullptr);
  const Status put = flip->Put("obj", RandomBytes(256 << 10, 10));
  EXPECT_EQ(put.code(), StatusCode::kUnavailable) << put.ToString();
  EXPECT_NE(put.message().find("BadDigest"), std::string::npos) << put.ToString();
  EXPECT_EQ(proxy->faults_injected(), 1);
  EXPECT_TRUE(SameBytes(direct->Get("obj"), old_data));
}

TEST_F(S3TargetTest, SessionTokenAndDigestsAreSentAndSigned) {
  auto proxy = StartProxy();
  ASSERT_NE(proxy, nullptr);
  fixture_->SetEnvironment(proxy->endpoint());
  ::setenv("AWS_SESSION_TOKEN", "session-token-123", 1);
  auto target = Open("token");
  ASSERT_NE(target, nullptr);
  ASSERT_TRUE(target->Put("obj", "hello").ok());
  EXPECT_EQ(Text(target->Get("obj")), "hello");

  const std::string requests = proxy->CapturedRequests();
  EXPECT_NE(requests.find("PUT /kvc-test/token/obj HTTP/1.1"), std::string::npos) << requests;
  EXPECT_NE(requests.find("x-amz-security-token: session-token-123\r\n"), std::string::npos);
  EXPECT_NE(requests.find("Content-MD5: XUFAKrxLKna5cZ2REBfFkg==\r\n"), std::string::npos);
  EXPECT_NE(requests.find("x-amz-content-sha256: "
                          "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824\r\n"),
            std::string::npos);
  EXPECT_NE(requests.find("SignedHeaders=content-md5;host;x-amz-content-sha256;x-amz-date;"
                          "x-amz-security-token"),
            std::string::npos)
      << requests;
  EXPECT_EQ(requests.find(S3Fixture::kSecretKey), std::string::npos);
}

TEST_F(S3TargetTest, OneTargetFromManyThreads) {
  auto target = Open("threads");
  ASSERT_NE(target, nullptr);
  constexpr int kThreads = 4;
  constexpr int kRounds = 8;
  std::vector<std::thread> threads;
  std::vector<int> failures(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < kRounds; ++r) {
        const std::string name = "t" + std::to_string(t) + "/r" + std::to_string(r);
        const std::string data = RandomBytes(1000 + r * 100, static_cast<uint32_t>(t * 100 + r));
        if (!target->Put(name, data).ok()) ++failures[t];
        auto got = target->Get(name);
        if (!got.ok() || *got != data) ++failures[t];
        if (!target->List("t" + std::to_string(t) + "/").ok()) ++failures[t];
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], 0) << "thread " << t;
  auto all = target->List("");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), static_cast<size_t>(kThreads * kRounds));
}

}  // namespace
}  // namespace kvc::backup
