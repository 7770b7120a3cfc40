#include "backup/snapshot.h"

#include <openssl/evp.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <vector>

#include "backup/layout.h"
#include "common/clock.h"
#include "common/random.h"

namespace kvc::backup {
namespace fs = std::filesystem;

namespace {

int64_t ElapsedMs(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               since)
      .count();
}

}  // namespace

Result<std::string> Sha256File(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return IoError("cannot read " + path);
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) {
    return Internal("cannot start SHA-256");
  }
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    const std::streamsize n = in.gcount();
    if (n > 0) EVP_DigestUpdate(ctx.get(), buf.data(), static_cast<size_t>(n));
  }
  if (in.bad()) return IoError("cannot read " + path);
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx.get(), md, &len);
  return HexEncode(std::string(reinterpret_cast<const char*>(md), len));
}

Result<SnapshotOutcome> UploadSnapshot(const SnapshotCopier& copy_fn, Target& target,
                                       const std::string& db_name, const std::string& db_id,
                                       const std::string& scratch_dir) {
  const std::string file =
      (fs::path(scratch_dir) / ("snapshot-" + HexEncode(RandomBytes(8)) + ".sqlite3")).string();
  auto cleanup = [&] {
    std::error_code ec;
    for (const char* suffix : {"", "-wal", "-shm", "-journal"}) fs::remove(file + suffix, ec);
  };
  SnapshotOutcome out;
  const auto copy_start = std::chrono::steady_clock::now();
  Result<SnapshotFileInfo> copy = copy_fn(file);
  const int64_t now_ms = NowUnixMs();
  if (!copy.ok()) {
    cleanup();
    return copy.status();
  }
  out.copy_ms = ElapsedMs(copy_start);
  Result<std::string> sha = Sha256File(file);
  if (!sha.ok()) {
    cleanup();
    return sha.status();
  }
  std::error_code ec;
  codec::SnapshotManifest& m = out.manifest;
  m.database_id = db_id;
  m.database = db_name;
  m.version = copy->version;
  m.time_ms = now_ms;
  m.key_count = copy->key_count;
  m.bytes = static_cast<int64_t>(fs::file_size(file, ec));
  m.sha256 = *sha;
  out.data_object = SnapshotDataName(db_name, m.version, m.time_ms);
  out.manifest_object = SnapshotManifestName(db_name, m.version, m.time_ms);
  const auto upload_start = std::chrono::steady_clock::now();
  Status s = target.PutFile(out.data_object, file);
  cleanup();
  KVC_RETURN_IF_ERROR(s);
  KVC_RETURN_IF_ERROR(target.Put(out.manifest_object, codec::EncodeSnapshotManifest(m)));
  out.upload_ms = ElapsedMs(upload_start);
  return out;
}

}  // namespace kvc::backup
