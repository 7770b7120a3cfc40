// Backup targets without a network: object names, target URLs, S3's URI encoding, the
// directory target on a temporary directory, the S3 listing/error XML reader, and the
// destinations the admin API may back up to.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "backup/destinations.h"
#include "backup/dir_target.h"
#include "backup/s3_target.h"
#include "backup/s3_xml.h"
#include "backup/target.h"

namespace kvc::backup {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> Names(const std::vector<ObjectInfo>& objects) {
  std::vector<std::string> names;
  names.reserve(objects.size());
  for (const ObjectInfo& o : objects) names.push_back(o.name);
  return names;
}

std::string AllByteValues(int copies) {
  std::string s;
  for (int i = 0; i < copies; ++i) {
    for (int b = 0; b < 256; ++b) s.push_back(static_cast<char>(b));
  }
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

TEST(BackupObjectName, Valid) {
  for (const char* name : {"a", "snap-0001.db", "log/2024/01/seg_0001.bin", "A.B-c_d", "...x",
                           "x..", "a/.hidden", "0"}) {
    EXPECT_TRUE(IsValidObjectName(name)) << name;
  }
}

TEST(BackupObjectName, Invalid) {
  for (const char* name : {"", "/a", "a/", "a//b", "..", "a/../b", "../a", ".", "a/./b", "a b",
                           "a+b", "a#tmp", "é", "a\\b", "a:b", "a\nb", "a?b", "a%2Fb"}) {
    EXPECT_FALSE(IsValidObjectName(name)) << name;
  }
  EXPECT_FALSE(IsValidObjectName(std::string_view("a\0b", 3)));
}

class ScopedEnv {
 public:
  ScopedEnv() {
    for (const char* name : kNames) {
      const char* value = std::getenv(name);
      saved_.emplace_back(name, value == nullptr ? std::string("\x01") : std::string(value));
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    for (const auto& [name, value] : saved_) {
      if (value == "\x01") {
        ::unsetenv(name.c_str());
      } else {
        ::setenv(name.c_str(), value.c_str(), 1);
      }
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  static constexpr const char* kNames[] = {
      "AWS_ACCESS_KEY_ID",  "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION",
      "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL_S3",   "AWS_ENDPOINT_URL"};
  std::vector<std::pair<std::string, std::string>> saved_;
};

TEST(OpenTarget, S3UrlsAndEnvironment) {
  ScopedEnv env;
  TargetOptions options;
  // No credentials.
  auto target = OpenTarget("s3://my-bucket/backups", options);
  ASSERT_FALSE(target.ok());
  EXPECT_EQ(target.status().code(), StatusCode::kInvalidArgument);

  ::setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE", 1);
  ::setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", 1);
  target = OpenTarget("s3://my-bucket/backups/", options);
  ASSERT_TRUE(target.ok()) << target.status().ToString();
  EXPECT_EQ((*target)->Describe(), "s3://my-bucket/backups (https://s3.us-east-1.amazonaws.com)");
  EXPECT_EQ((*target)->Describe().find("wJalr"), std::string::npos);

  ::setenv("AWS_DEFAULT_REGION", "eu-west-1", 1);
  target = OpenTarget("s3://my-bucket", options);
  ASSERT_TRUE(target.ok());
  EXPECT_EQ((*target)->Describe(), "s3://my-bucket (https://s3.eu-west-1.amazonaws.com)");
  ::setenv("AWS_REGION", "ap-south-2", 1);  // wins over AWS_DEFAULT_REGION
  target = OpenTarget("s3://my-bucket", options);
  ASSERT_TRUE(target.ok());
  EXPECT_EQ((*target)->Describe(), "s3://my-bucket (https://s3.ap-south-2.amazonaws.com)");

  ::setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9000/", 1);
  target = OpenTarget("s3://my-bucket/a b/c", options);
  ASSERT_TRUE(target.ok());
  EXPECT_EQ((*target)->Describe(), "s3://my-bucket/a b/c (http://127.0.0.1:9000)");
  ::setenv("AWS_ENDPOINT_URL_S3", "https://minio.example:9443", 1);  // wins
  target = OpenTarget("s3://my-bucket", options);
  ASSERT_TRUE(target.ok());
  EXPECT_EQ((*target)->Describe(), "s3://my-bucket (https://minio.example:9443)");

  for (const char* bad :
       {"s3://", "s3://ab", "s3://My-Bucket", "s3://-bucket", "s3://bucket-", "s3://bu_cket",
        "s3://bucket//x", "s3://bucket/a/../b", "s3://bucket/./b", "s3://bucket/a\tb"}) {
    EXPECT_EQ(OpenTarget(bad, options).status().code(), StatusCode::kInvalidArgument) << bad;
  }
  for (const char* endpoint :
       {"127.0.0.1:9000", "ftp://host", "http://", "http://host/path", "http://user@host"}) {
    ::setenv("AWS_ENDPOINT_URL_S3", endpoint, 1);
    EXPECT_EQ(OpenTarget("s3://bucket", options).status().code(), StatusCode::kInvalidArgument)
        << endpoint;
  }
  ::setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:9000", 1);
  ::setenv("AWS_REGION", "us-east-1:x", 1);
  EXPECT_EQ(OpenTarget("s3://bucket", options).status().code(), StatusCode::kInvalidArgument);
  ::setenv("AWS_REGION", "us-east-1", 1);
  ::setenv("AWS_SESSION_TOKEN", "token\r\nX-Injected: 1", 1);
  EXPECT_EQ(OpenTarget("s3://bucket", options).status().code(), StatusCode::kInvalidArgument);
  ::unsetenv("AWS_SESSION_TOKEN");
  ::setenv("AWS_ACCESS_KEY_ID", "AKID/2024", 1);
  EXPECT_EQ(OpenTarget("s3://bucket", options).status().code(), StatusCode::kInvalidArgument);
}

TEST(OpenTarget, OtherUrls) {
  TargetOptions options;
  EXPECT_EQ(OpenTarget("", options).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(OpenTarget("gs://bucket", options).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(OpenTarget("https://host/x", options).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(OpenTarget("file://", options).status().code(), StatusCode::kInvalidArgument);
}

TEST(S3UriEncode, CanonicalForm) {
  EXPECT_EQ(S3UriEncode("AZaz09-._~", false), "AZaz09-._~");
  EXPECT_EQ(S3UriEncode("a b+c=d&e/f", false), "a%20b%2Bc%3Dd%26e%2Ff");
  EXPECT_EQ(S3UriEncode("a b+c=d&e/f", true), "a%20b%2Bc%3Dd%26e/f");
  EXPECT_EQ(S3UriEncode("!'()*@$,;:?#[]%", true), "%21%27%28%29%2A%40%24%2C%3B%3A%3F%23%5B%5D%25");
  EXPECT_EQ(S3UriEncode("\xC3\xA9\xFF", true), "%C3%A9%FF");
  EXPECT_EQ(S3UriEncode(std::string_view("\0", 1), true), "%00");
}

class DirTargetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "kvc-dir-target-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    tmp_ = tmpl;
    root_ = tmp_ + "/backups/nested";
    auto target = OpenTarget(root_, TargetOptions());
    ASSERT_TRUE(target.ok()) << target.status().ToString();
    target_ = std::move(target).value();
  }
  void TearDown() override { fs::remove_all(tmp_); }

  // Every file under the root, relative, sorted.
  std::vector<std::string> FilesOnDisk() const {
    std::vector<std::string> files;
    for (const auto& e : fs::recursive_directory_iterator(root_)) {
      if (e.is_regular_file()) files.push_back(fs::relative(e.path(), root_).string());
    }
    std::sort(files.begin(), files.end());
    return files;
  }

  std::string tmp_;
  std::string root_;
  std::unique_ptr<Target> target_;
};

TEST_F(DirTargetTest, OpenCreatesPrivateDirectory) {
  struct stat st {};
  ASSERT_EQ(::stat(root_.c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0700U);
  EXPECT_EQ(target_->Describe(), root_);
  // file:// names the same directory; an existing directory opens as is.
  auto again = OpenTarget("file://" + root_ + "/", TargetOptions());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->Describe(), root_);
  // A file where the directory should be.
  WriteFile(tmp_ + "/plain", "x");
  EXPECT_EQ(OpenTarget(tmp_ + "/plain", TargetOptions()).status().code(), StatusCode::kIoError);
  EXPECT_EQ(OpenTarget(tmp_ + "/plain/sub", TargetOptions()).status().code(), StatusCode::kIoError);
}

TEST_F(DirTargetTest, PutGetReplaceDelete) {
  const std::string data = AllByteValues(3);
  ASSERT_TRUE(target_->Put("snap/0001.db", data).ok());
  auto got = target_->Get("snap/0001.db");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, data);

  ASSERT_TRUE(target_->Put("snap/0001.db", "second").ok());
  EXPECT_EQ(*target_->Get("snap/0001.db"), "second");

  ASSERT_TRUE(target_->Put("empty", "").ok());
  got = target_->Get("empty");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, "");

  struct stat st {};
  ASSERT_EQ(::stat((root_ + "/snap").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700U);
  ASSERT_EQ(::stat((root_ + "/snap/0001.db").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600U);

  ASSERT_TRUE(target_->Delete("snap/0001.db").ok());
  EXPECT_EQ(target_->Get("snap/0001.db").status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(target_->Delete("snap/0001.db").ok());  // absent: OK
  EXPECT_TRUE(target_->Delete("never/was/here").ok());
  EXPECT_TRUE(target_->Delete("snap").ok());  // a "directory", not an object
  EXPECT_EQ(FilesOnDisk(), std::vector<std::string>{"empty"});
}

TEST_F(DirTargetTest, NotFoundAndInvalidNames) {
  EXPECT_EQ(target_->Get("missing").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(target_->GetFile("missing", tmp_ + "/out").code(), StatusCode::kNotFound);
  ASSERT_TRUE(target_->Put("dir/obj", "x").ok());
  EXPECT_EQ(target_->Get("dir").status().code(), StatusCode::kNotFound);  // a directory
  EXPECT_EQ(target_->Get("dir/obj/deeper").status().code(), StatusCode::kNotFound);
  for (const char* bad : {"", "../escape", "/abs", "a b", "x#kvc-tmp.123456"}) {
    EXPECT_EQ(target_->Put(bad, "x").code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(target_->Get(bad).status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(target_->Delete(bad).code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(target_->PutFile(bad, tmp_ + "/none").code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(target_->GetFile(bad, tmp_ + "/out").code(), StatusCode::kInvalidArgument);
  }
  EXPECT_FALSE(fs::exists(tmp_ + "/escape"));
  // An object cannot also be a directory of others here.
  EXPECT_EQ(target_->Put("dir/obj/child", "x").code(), StatusCode::kIoError);
  EXPECT_EQ(target_->Put("dir", "x").code(), StatusCode::kIoError);
  EXPECT_EQ(*target_->Get("dir/obj"), "x");
}

TEST_F(DirTargetTest, PutFileAndGetFileCopy) {
  const std::string data = AllByteValues(4096 + 7);  // over 1 MiB: several buffer fills
  const std::string src = tmp_ + "/src.bin";
  const std::string dst = tmp_ + "/dst.bin";
  WriteFile(src, data);
  ASSERT_TRUE(target_->PutFile("big/file.bin", src).ok());
  WriteFile(src, "changed afterwards");       // a copy, not a link
  WriteFile(dst, std::string(5 << 20, 'z'));  // GetFile truncates
  ASSERT_TRUE(target_->GetFile("big/file.bin", dst).ok());
  EXPECT_EQ(ReadFile(dst), data);
  EXPECT_EQ(*target_->Get("big/file.bin"), data);
  EXPECT_EQ(target_->PutFile("x", tmp_ + "/no-such-file").code(), StatusCode::kIoError);
  EXPECT_EQ(target_->GetFile("big/file.bin", tmp_ + "/no-dir/out").code(), StatusCode::kIoError);
  EXPECT_EQ(FilesOnDisk(), std::vector<std::string>{"big/file.bin"});
}

TEST_F(DirTargetTest, ListByPrefixSortedAndNested) {
  const std::vector<std::string> names = {"snap/2/b", "snap/10", "snap/2/a", "log/0001",
                                          "snapshot", "a",       "snap-x",   "log/0002/x"};
  for (const std::string& name : names) {
    ASSERT_TRUE(target_->Put(name, name + "!").ok()) << name;
  }
  auto all = target_->List("");
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_EQ(Names(*all), (std::vector<std::string>{"a", "log/0001", "log/0002/x", "snap-x",
                                                   "snap/10", "snap/2/a", "snap/2/b", "snapshot"}));
  for (const ObjectInfo& o : *all) EXPECT_EQ(o.size, static_cast<int64_t>(o.name.size() + 1));

  EXPECT_EQ(Names(*target_->List("snap")),
            (std::vector<std::string>{"snap-x", "snap/10", "snap/2/a", "snap/2/b", "snapshot"}));
  EXPECT_EQ(Names(*target_->List("snap/")),
            (std::vector<std::string>{"snap/10", "snap/2/a", "snap/2/b"}));
  EXPECT_EQ(Names(*target_->List("snap/2")), (std::vector<std::string>{"snap/2/a", "snap/2/b"}));
  EXPECT_EQ(Names(*target_->List("snap/2/a")), (std::vector<std::string>{"snap/2/a"}));
  EXPECT_EQ(Names(*target_->List("log/0002/")), (std::vector<std::string>{"log/0002/x"}));
  EXPECT_TRUE(target_->List("zzz")->empty());
  EXPECT_TRUE(target_->List("snap/2/a/")->empty());
}

TEST_F(DirTargetTest, NoTemporaryFilesVisible) {
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(target_->Put("obj/" + std::to_string(i % 3), std::string(1000 + i, 'x')).ok());
  }
  // Nothing but the objects is left on disk.
  EXPECT_EQ(FilesOnDisk(), (std::vector<std::string>{"obj/0", "obj/1", "obj/2"}));
  // What a crash in the middle of a Put leaves, and stray files, are not objects.
  WriteFile(root_ + "/obj/#kvc-tmp.AbC123", "partial");
  WriteFile(root_ + "/stray file", "x");
  fs::create_symlink(root_ + "/obj/0", root_ + "/link");
  EXPECT_EQ(Names(*target_->List("")), (std::vector<std::string>{"obj/0", "obj/1", "obj/2"}));
}

// --- S3 XML --------------------------------------------------------------------------------

constexpr char kListing[] = R"(<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
  <Name>bucket</Name>
  <Prefix>backups/</Prefix>
  <KeyCount>3</KeyCount>
  <MaxKeys>3</MaxKeys>
  <IsTruncated>true</IsTruncated>
  <NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=</NextContinuationToken>
  <Contents>
    <Key>backups/a&amp;b &lt;c&gt; &quot;d&quot; &apos;e&apos;</Key>
    <LastModified>2009-10-12T17:50:30.000Z</LastModified>
    <ETag>&quot;fba9dede5f27731c9771645a39863328&quot;</ETag>
    <Size>434234</Size>
    <StorageClass>STANDARD</StorageClass>
  </Contents>
  <Contents><Key>backups/&#65;&#x42;&#xe9;&#x1F600;</Key><Size>0</Size></Contents>
  <Contents><Size>9223372036854775807</Size><Key><![CDATA[backups/<raw & cdata>]]></Key></Contents>
  <CommonPrefixes><Prefix>backups/x/</Prefix></CommonPrefixes>
</ListBucketResult>
)";

TEST(S3ListingXml, ParsesKeysSizesAndEntities) {
  auto page = ParseListObjectsV2(kListing);
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  ASSERT_EQ(page->objects.size(), 3U);
  EXPECT_EQ(page->objects[0].name, "backups/a&b <c> \"d\" 'e'");
  EXPECT_EQ(page->objects[0].size, 434234);
  EXPECT_EQ(page->objects[1].name, "backups/AB\xC3\xA9\xF0\x9F\x98\x80");
  EXPECT_EQ(page->objects[1].size, 0);
  EXPECT_EQ(page->objects[2].name, "backups/<raw & cdata>");
  EXPECT_EQ(page->objects[2].size, INT64_MAX);
  EXPECT_TRUE(page->is_truncated);
  EXPECT_EQ(page->next_continuation_token, "1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=");
}

TEST(S3ListingXml, LastPageAndEmptyListing) {
  auto page = ParseListObjectsV2(
      "<ListBucketResult><IsTruncated>false</IsTruncated><Contents><Key>k</Key><Size>1</Size>"
      "</Contents></ListBucketResult>");
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  EXPECT_FALSE(page->is_truncated);
  EXPECT_TRUE(page->next_continuation_token.empty());
  ASSERT_EQ(page->objects.size(), 1U);

  page = ParseListObjectsV2(
      "\xEF\xBB\xBF<?xml version='1.0'?><!-- empty --><ListBucketResult a='1' b=\"2\">"
      "<Name/><IsTruncated>false</IsTruncated><?pi data?></ListBucketResult>\n<!-- end -->\n");
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  EXPECT_TRUE(page->objects.empty());
}

TEST(S3ListingXml, MalformedIsCorruption) {
  const std::string ok_tail = "<IsTruncated>false</IsTruncated></ListBucketResult>";
  const std::vector<std::string> bad = {
      "",
      "   ",
      "not xml",
      "<ListBucketResult>",                                  // unclosed
      "<ListBucketResult><IsTruncated>false</IsTruncated>",  // unclosed root
      "<ListBucketResult></ListBucketResults>",              // mismatched
      "<Other><IsTruncated>false</IsTruncated></Other>",     // wrong root
      "<ListBucketResult></ListBucketResult>",               // no IsTruncated
      "<ListBucketResult><IsTruncated>maybe</IsTruncated></ListBucketResult>",
      "<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>",  // no token
      "<ListBucketResult><IsTruncated>true</IsTruncated><NextContinuationToken>"
      "</NextContinuationToken></ListBucketResult>",
      "<ListBucketResult><IsTruncated>false</IsTruncated><IsTruncated>false</IsTruncated>"
      "</ListBucketResult>",
      "<ListBucketResult><Contents><Key>k</Key></Contents>" + ok_tail,    // no Size
      "<ListBucketResult><Contents><Size>1</Size></Contents>" + ok_tail,  // no Key
      "<ListBucketResult><Contents><Key></Key><Size>1</Size></Contents>" + ok_tail,
      "<ListBucketResult><Contents><Key>k</Key><Key>j</Key><Size>1</Size></Contents>" + ok_tail,
      "<ListBucketResult><Contents><Key>k</Key><Size>-1</Size></Contents>" + ok_tail,
      "<ListBucketResult><Contents><Key>k</Key><Size>+1</Size></Contents>" + ok_tail,
      "<ListBucketResult><Contents><Key>k</Key><Size> 1</Size></Contents>" + ok_tail,
      "<ListBucketResult><Contents><Key>k</Key><Size>1x</Size></Contents>" + ok_tail,
      "<ListBucketResult><Contents><Key>k</Key><Size>9223372036854775808</Size></Contents>" +
          ok_tail,
      "<ListBucketResult><Contents><Key>k&bogus;</Key><Size>1</Size></Contents>" + ok_tail,
      "<ListBucketResult><Contents><Key>k&amp</Key><Size>1</Size></Contents>" + ok_tail,
      "<ListBucketResult><Contents><Key>k&#0;</Key><Size>1</Size></Contents>" + ok_tail,
      "<ListBucketResult><Contents><Key>k&#xD800;</Key><Size>1</Size></Contents>" + ok_tail,
      "<ListBucketResult><Contents><Key>k&#x110000;</Key><Size>1</Size></Contents>" + ok_tail,
      "<ListBucketResult><Contents><Key>k&#xZZ;</Key><Size>1</Size></Contents>" + ok_tail,
      "<ListBucketResult><Contents><Key>k\x01</Key><Size>1</Size></Contents>" + ok_tail,
      "<ListBucketResult><Contents><Key>k\xFF</Key><Size>1</Size></Contents>" + ok_tail,  // UTF-8
      "<ListBucketResult><Contents>text<Key>k</Key><Size>1</Size></Contents>" + ok_tail,
      "<!DOCTYPE x [<!ENTITY e 'k'>]><ListBucketResult>" + ok_tail,
      "<ListBucketResult>" + ok_tail + "<ListBucketResult>" + ok_tail,  // two roots
      "<ListBucketResult>" + ok_tail + "trailing",
      "leading<ListBucketResult>" + ok_tail,
      "<ListBucketResult><!-- a -- b -->" + ok_tail,
      "<ListBucketResult><!-- open" + ok_tail,
      "<ListBucketResult><?xml version='1.0'?>" + ok_tail,
      "<ListBucketResult a=1>" + ok_tail,
      "<ListBucketResult a='<'>" + ok_tail,
      "<ListBucketResult a='1'b='2'>" + ok_tail,
      "<ListBucketResult><![CDATA[x]]>" + ok_tail,  // text mixed with elements
      "<ListBucketResult><Contents><Key>a]]>b</Key><Size>1</Size></Contents>" + ok_tail,
      "<1ListBucketResult>" + ok_tail,
      "<ListBucketResult><IsTruncated>false</IsTruncated></ListBucketResult",
  };
  for (const std::string& xml : bad) {
    auto page = ParseListObjectsV2(xml);
    EXPECT_EQ(page.status().code(), StatusCode::kCorruption) << xml;
  }
}

TEST(S3ListingXml, DepthIsBounded) {
  std::string deep = "<ListBucketResult><IsTruncated>false</IsTruncated>";
  for (int i = 0; i < kMaxXmlDepth; ++i) deep += "<a>";
  for (int i = 0; i < kMaxXmlDepth; ++i) deep += "</a>";
  deep += "</ListBucketResult>";
  EXPECT_EQ(ParseListObjectsV2(deep).status().code(), StatusCode::kCorruption);
  std::string shallow = "<ListBucketResult><IsTruncated>false</IsTruncated>";
  for (int i = 0; i < kMaxXmlDepth - 2; ++i) shallow += "<a>";
  for (int i = 0; i < kMaxXmlDepth - 2; ++i) shallow += "</a>";
  shallow += "</ListBucketResult>";
  EXPECT_TRUE(ParseListObjectsV2(shallow).ok());
}

TEST(S3ErrorXml, CodeAndMessage) {
  auto error = ParseS3Error(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>NoSuchKey</Code><Message>The "
      "specified key does not exist.</Message><Key>a&amp;b</Key><RequestId>1</RequestId>"
      "</Error>");
  ASSERT_TRUE(error.ok()) << error.status().ToString();
  EXPECT_EQ(error->code, "NoSuchKey");
  EXPECT_EQ(error->message, "The specified key does not exist.");
  EXPECT_EQ(ParseS3Error("<Error/>")->code, "");
  EXPECT_EQ(ParseS3Error("<html>502</html>").status().code(), StatusCode::kCorruption);
  EXPECT_EQ(ParseS3Error("Bad Gateway").status().code(), StatusCode::kCorruption);
  EXPECT_EQ(ParseS3Error("<Error><Code>a</Code><Code>b</Code></Error>").status().code(),
            StatusCode::kCorruption);
}

// --- BackupDestinations: where the admin API may write ---------------------------------------

class BackupDestinationsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "kvc-dest-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    // Canonical, so expectations compare with what normalisation gives.
    tmp_ = fs::canonical(tmpl).string();
    data_ = tmp_ + "/data";
    fs::create_directories(data_);
    fs::create_directories(tmp_ + "/backups/a");
    fs::create_directories(tmp_ + "/backups/b");
  }
  void TearDown() override { fs::remove_all(tmp_); }

  std::string tmp_;
  std::string data_;
};

TEST_F(BackupDestinationsTest, NormalisesDotsSlashesSymlinksAndS3) {
  EXPECT_EQ(*NormalizeBackupDestination(tmp_ + "/backups/a/"), tmp_ + "/backups/a");
  EXPECT_EQ(*NormalizeBackupDestination(tmp_ + "//backups/./b/../a//"), tmp_ + "/backups/a");
  EXPECT_EQ(*NormalizeBackupDestination("file://" + tmp_ + "/backups/a"), tmp_ + "/backups/a");
  EXPECT_EQ(*NormalizeBackupDestination(tmp_ + "/backups/new/x/.."), tmp_ + "/backups/new");
  fs::create_directory_symlink(tmp_ + "/backups/a", tmp_ + "/link");
  EXPECT_EQ(*NormalizeBackupDestination(tmp_ + "/link/"), tmp_ + "/backups/a");
  EXPECT_EQ(*NormalizeBackupDestination("s3://bucket//prefix/x/"), "s3://bucket/prefix/x");
  EXPECT_EQ(*NormalizeBackupDestination("s3://bucket"), "s3://bucket");
  for (const std::string bad : {"", "backups", "./backups", "../x", "s3://", "s3:///",
                                "s3://bucket/../other", "s3://bucket/./p", "http://x/y"}) {
    auto r = NormalizeBackupDestination(bad);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_NE(NormalizeBackupDestination("backups").status().message().find("relative path"),
            std::string::npos);
}

TEST_F(BackupDestinationsTest, StartUpRefusesRelativeAndDataDirectoryPaths) {
  fs::create_directory_symlink(data_, tmp_ + "/data-link");
  for (const std::string& bad :
       {std::string("relative/dir"), data_, data_ + "/", data_ + "/backups",
        tmp_ + "/backups/../data/x", tmp_ + "/data-link/b", tmp_, std::string("/")}) {
    auto d = BackupDestinations::Create(bad, {}, data_);
    ASSERT_FALSE(d.ok()) << bad;
    EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(d.status().message().rfind("--backup-to: ", 0), 0u) << d.status().message();
    auto a = BackupDestinations::Create(tmp_ + "/backups/a", {bad}, data_);
    ASSERT_FALSE(a.ok()) << bad;
    EXPECT_EQ(a.status().message().rfind("--backup-allow: ", 0), 0u) << a.status().message();
  }
  // The data directory given relative or through a symlink is still recognised.
  auto via_link = BackupDestinations::Create(data_ + "/x", {}, tmp_ + "/data-link/");
  EXPECT_FALSE(via_link.ok());
  auto ok =
      BackupDestinations::Create(tmp_ + "/backups/a/", {"s3://b/p", tmp_ + "/backups/b"}, data_);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->default_destination(), tmp_ + "/backups/a");
  // Without --backup-to the first allowed destination is the default.
  auto first = BackupDestinations::Create("", {"s3://b/p/", tmp_ + "/backups/b"}, data_);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->default_destination(), "s3://b/p");
}

TEST_F(BackupDestinationsTest, RequestsGoOnlyWhereTheOperatorAllowed) {
  const std::string a = tmp_ + "/backups/a";
  const std::string b = tmp_ + "/backups/b";
  auto d = BackupDestinations::Create(a, {b, "s3://bucket/allowed"}, data_);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  // The default: no "to", or the default however it is spelled, for every admin.
  for (bool server_wide : {false, true}) {
    EXPECT_EQ(*d->Resolve("", server_wide), a);
    EXPECT_EQ(*d->Resolve(a + "/", server_wide), a);
    EXPECT_EQ(*d->Resolve(tmp_ + "/backups/b/../a", server_wide), a);
  }
  // A server-wide admin picks among the allowed ones.
  EXPECT_EQ(*d->Resolve(b, true), b);
  EXPECT_EQ(*d->Resolve("s3://bucket/allowed/", true), "s3://bucket/allowed");
  // A database-scoped admin may not, and learns nothing about what exists.
  auto scoped_allowed = d->Resolve(b, false);
  auto scoped_other = d->Resolve("/somewhere/else", false);
  EXPECT_EQ(scoped_allowed.status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(scoped_other.status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(scoped_allowed.status().message(), scoped_other.status().message());
  EXPECT_EQ(d->Resolve("s3://bucket/other", false).status().code(), StatusCode::kPermissionDenied);
  // Not allowed, for anyone.
  for (const std::string& other :
       {tmp_ + "/backups", tmp_ + "/backups/c", std::string("/var/kvc-nowhere"),
        std::string("s3://bucket/allowed/sub"), std::string("s3://bucket"),
        std::string("s3://other/allowed")}) {
    auto r = d->Resolve(other, true);
    EXPECT_EQ(r.status().code(), StatusCode::kPermissionDenied) << other;
    EXPECT_NE(r.status().message().find("not one the operator allowed"), std::string::npos);
  }
  // Relative paths and the data directory: 400 with a text saying why.
  for (bool server_wide : {false, true}) {
    auto rel = d->Resolve("backups/a", server_wide);
    EXPECT_EQ(rel.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(rel.status().message().find("relative path"), std::string::npos);
  }
  for (const std::string& inside : {data_, data_ + "/", data_ + "/x", a + "/../../data/y"}) {
    auto r = d->Resolve(inside, true);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << inside;
    EXPECT_NE(r.status().message().find("inside the server's data directory"), std::string::npos)
        << r.status().message();
  }
  // A symlink made later that leads into the data directory is followed, then refused.
  fs::create_directory_symlink(data_, b + "/sneaky");
  EXPECT_EQ(d->Resolve(b + "/sneaky", true).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(BackupDestinationsTest, NoneConfiguredRefusesEveryRequest) {
  BackupDestinations none;
  for (const std::string& to : {std::string(), tmp_ + "/backups/a", std::string("s3://x/y")}) {
    auto r = none.Resolve(to, true);
    EXPECT_EQ(r.status().code(), StatusCode::kPermissionDenied) << to;
    EXPECT_NE(r.status().message().find("no backup destination"), std::string::npos);
  }
  auto empty = BackupDestinations::Create("", {}, data_);
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
  EXPECT_EQ(empty->Resolve("", true).status().code(), StatusCode::kPermissionDenied);
}

}  // namespace
}  // namespace kvc::backup
