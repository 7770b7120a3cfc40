// Power loss, not just process death: the engine and the catalog run on SQLite through
// testutil::PowerLossVfs, the power goes out at a random I/O call in the middle of the work,
// the files are rewritten to what a disk could hold afterwards (every unsynced write undone,
// or unsynced writes kept, dropped or torn sector by sector), and the reopened file must hold
// every acknowledged change, nothing half-applied, and pass SQLite's integrity check. Each
// cycle continues on the file the previous power loss left, so damage would accumulate.
//
// Environment: KVC_POWER_LOSS_CYCLES (cycles per test; default 300 for the engine and 100 for
// the catalog, fewer under sanitizers), KVC_POWER_LOSS_SEED (the run's seed, printed; every
// cycle's choices derive from it and the cycle number), KVC_POWER_LOSS_SYNC (full, normal or
// off: the engine test's sync mode; with normal or off it must find lost writes and fail).
// Replaying a seed repeats the test's choices (writes, cut positions, tears); thread timing
// (how group commit batches writes) and the engine's random version steps may still differ.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <iostream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "common/random.h"
#include "engine/engine.h"
#include "storage/sqlite/sqlite_backend.h"
#include "storage/sqlite/sqlite_util.h"
#include "storage/storage.h"
#include "testutil/kv_model.h"
#include "testutil/power_loss_vfs.h"

namespace kvc {
namespace {
namespace fs = std::filesystem;
using storage::sqlite::Connection;
using storage::sqlite::Stmt;
using testutil::PowerLossVfs;
using testutil::StampOf;

constexpr char kVfsName[] = "kvc-power-loss";

#if defined(KVC_SANITIZED)
// Enough that the engine test's own check (some unsynced write was torn at a power loss) holds:
// since the WAL write buffer, few writes are unsynced when the power goes, and 30 cycles under
// ASan once tore none (seed 16934238859031212043, a CI run of 2026-11-29). About 8 s under ASan
// and 33 s under TSan (run beside the other tests).
constexpr int kDefaultEngineCycles = 100;
constexpr int kDefaultCatalogCycles = 20;
#else
constexpr int kDefaultEngineCycles = 300;
constexpr int kDefaultCatalogCycles = 100;
#endif

// ---------------------------------------------------------------------------------------------
// Settings and seeds.

int64_t EnvInt(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const long long n = std::strtoll(v, &end, 0);
  return (end != nullptr && *end == '\0') ? n : fallback;
}

int Cycles(int fallback) { return static_cast<int>(EnvInt("KVC_POWER_LOSS_CYCLES", fallback)); }

uint64_t BaseSeed() {
  const char* v = std::getenv("KVC_POWER_LOSS_SEED");
  if (v != nullptr && *v != '\0') return std::strtoull(v, nullptr, 0);
  uint64_t seed = 0;
  const std::string bytes = RandomBytes(sizeof(seed));
  std::memcpy(&seed, bytes.data(), sizeof(seed));
  return seed;
}

// A cycle's own seed (splitmix64 of the run's seed and the cycle), so a cycle's choices do not
// depend on how many numbers earlier cycles drew.
uint64_t CycleSeed(uint64_t seed, int cycle) {
  uint64_t z = seed + 0x9e3779b97f4a7c15ULL * static_cast<uint64_t>(cycle + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

PowerLossVfs::Mode ModeOf(int cycle) {
  return cycle % 2 == 0 ? PowerLossVfs::Mode::kDiscardUnsynced : PowerLossVfs::Mode::kTorn;
}
const char* ModeName(PowerLossVfs::Mode m) {
  return m == PowerLossVfs::Mode::kTorn ? "torn" : "discard-unsynced";
}

std::string Replay(uint64_t seed, int cycle) {
  return "replay: KVC_POWER_LOSS_SEED=" + std::to_string(seed) +
         " KVC_POWER_LOSS_CYCLES=" + std::to_string(cycle + 1);
}

// ---------------------------------------------------------------------------------------------
// SQLite helpers.

// Opens `path` through `vfs` (empty: the default VFS). The connection never checkpoints when
// it closes, so a verifier leaves the WAL exactly as the power loss left it and the next cycle
// goes on from there (the WAL grows across cycles and the engine's own checkpoints run inside
// the cycles, where the power can go out in them).
Status OpenNoCheckpointOnClose(Connection& c, const std::string& path, const std::string& vfs,
                               const char* sync) {
  KVC_RETURN_IF_ERROR(c.Open(path, SQLITE_OPEN_READWRITE, 2000,
                             std::string("pragma synchronous=") + sync + ";", vfs));
  sqlite3_db_config(c.db(), SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, nullptr);
  return Status::Ok();
}

// The rows of `pragma integrity_check`, joined ("ok" when the file is sound).
std::string IntegrityCheck(Connection& c) {
  auto s = c.PrepareOnce("pragma integrity_check");
  if (!s.ok()) return s.status().ToString();
  std::string out;
  int rc;
  while ((rc = s->Step()) == SQLITE_ROW) out += (out.empty() ? "" : "; ") + s->ColumnText(0);
  if (rc != SQLITE_DONE) out += " (step failed: " + c.Error("").ToString() + ")";
  return out;
}

// Runs a checkpoint of a random kind on `c` (a second connection to a database in use), so
// the power can go out inside checkpoints, and TRUNCATE ones truncate the WAL. Returns the
// result code of sqlite3_exec.
int ForceCheckpoint(Connection& c, std::mt19937_64& rng) {
  static constexpr const char* kModes[] = {"passive", "full", "restart", "truncate"};
  const std::string sql = std::string("pragma wal_checkpoint(") + kModes[rng() % 4] + ")";
  return sqlite3_exec(c.db(), sql.c_str(), nullptr, nullptr, nullptr);
}

bool IsBusy(int rc) { return (rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED; }

// Where a cycle's power cut goes: at the n-th write/sync/truncate from the start of step `at`
// (a group of writes, or a catalog change), at the n-th sync from there (a commit written
// whole but not yet durable), inside a checkpoint forced after step `at`, or nowhere (a clean
// shutdown, then the power loss).
struct CutPlan {
  enum class Where { kNone, kAnyCall, kSync, kCheckpoint };
  Where where = Where::kNone;
  int at = 0;
  int64_t n = 1;

  // `checkpoints`: whether the cycle forces checkpoints (otherwise no kCheckpoint).
  static CutPlan Random(std::mt19937_64& rng, int steps, bool checkpoints, int64_t max_calls) {
    CutPlan p;
    const uint64_t r = rng() % 20;
    p.at = static_cast<int>(rng() % static_cast<uint64_t>(steps));
    if (r < 2) {
      p.where = Where::kNone;
    } else if (r < 6) {
      p.where = Where::kSync;
      p.n = 1 + static_cast<int64_t>(rng() % 4);
    } else if (r < 10 && checkpoints) {
      p.where = Where::kCheckpoint;
      p.n = 1 + static_cast<int64_t>(rng() % 40);
    } else {
      p.where = Where::kAnyCall;
      p.n = 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(max_calls));
    }
    return p;
  }
  // Arms the cut if it goes before step `step`.
  void ArmBeforeStep(PowerLossVfs& vfs, int step) const {
    if (step != at) return;
    if (where == Where::kAnyCall) vfs.ArmCut(n);
    if (where == Where::kSync) vfs.ArmCutAtSync(n);
  }
  // Arms the cut if it goes into the checkpoint forced after step `step`.
  bool ArmBeforeCheckpoint(PowerLossVfs& vfs, int step) const {
    if (step != at || where != Where::kCheckpoint) return false;
    vfs.ArmCut(n);
    return true;
  }
};

std::string Printable(const std::string& s) {
  std::string out;
  for (char ch : s) {
    if (ch >= 0x20 && ch < 0x7f) {
      out += ch;
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", static_cast<unsigned char>(ch));
      out += buf;
    }
  }
  return out;
}

void AddReportTo(testutil::PowerLossReport* sum, const testutil::PowerLossReport& r) {
  sum->files += r.files;
  sum->writes_kept += r.writes_kept;
  sum->writes_dropped += r.writes_dropped;
  sum->writes_torn += r.writes_torn;
  sum->truncates_kept += r.truncates_kept;
  sum->truncates_undone += r.truncates_undone;
  sum->shm_removed += r.shm_removed;
}

std::string CutText(const PowerLossVfs& vfs) {
  const std::string c = vfs.last_cut();
  return c.empty() ? "none" : c;
}

struct EngineRun;
struct EngineStats;

// Each test registers the shim afresh and works in a temporary directory of its own.
class PowerLoss : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kvc-power-loss-" + HexEncode(RandomBytes(6)));
    fs::create_directories(dir_);
    auto v = PowerLossVfs::Register(kVfsName);
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    vfs_ = std::move(*v);
  }
  void TearDown() override {
    vfs_.reset();  // every connection through it is closed by now (test bodies own them)
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  // Runs the engine test's cycles (see the file comment); stops at the first failure.
  void RunEngine(const EngineRun& run, EngineStats* st);
  void RunEngineCycles(const EngineRun& run, EngineStats* st);

  fs::path dir_;
  std::unique_ptr<PowerLossVfs> vfs_;
};

// ---------------------------------------------------------------------------------------------
// The shim itself, on one file through the VFS methods (no SQLite pager in between).

// A file opened through a VFS's xOpen, closed with the object.
class VfsFile {
 public:
  VfsFile(sqlite3_vfs* vfs, const std::string& path)
      : mem_((static_cast<size_t>(vfs->szOsFile) + 7) / 8) {
    file_ = reinterpret_cast<sqlite3_file*>(mem_.data());
    const int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_MAIN_DB;
    path_ = path;
    rc_ = vfs->xOpen(vfs, path_.c_str(), file_, flags, nullptr);
  }
  ~VfsFile() {
    if (file_->pMethods != nullptr) file_->pMethods->xClose(file_);
  }
  VfsFile(const VfsFile&) = delete;
  VfsFile& operator=(const VfsFile&) = delete;

  int open_rc() const { return rc_; }
  int Write(const std::string& data, int64_t offset) {
    return file_->pMethods->xWrite(file_, data.data(), static_cast<int>(data.size()), offset);
  }
  int Truncate(int64_t size) { return file_->pMethods->xTruncate(file_, size); }
  int Sync() { return file_->pMethods->xSync(file_, SQLITE_SYNC_NORMAL); }
  int Read(std::string* out, int64_t offset) {
    return file_->pMethods->xRead(file_, out->data(), static_cast<int>(out->size()), offset);
  }

 private:
  std::vector<uint64_t> mem_;  // SQLite's file object, suitably aligned
  sqlite3_file* file_ = nullptr;
  std::string path_;  // must outlive the file (SQLite's rule for zName)
  int rc_ = SQLITE_ERROR;
};

std::string ReadWholeFile(const std::string& path) {
  std::string out;
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
  std::fclose(f);
  return out;
}

TEST_F(PowerLoss, VfsModel) {
  sqlite3_vfs* vfs = sqlite3_vfs_find(kVfsName);
  ASSERT_NE(vfs, nullptr);
  const std::string path = (dir_ / "raw.bin").string();
  const std::string synced(1000, 'A');
  {
    VfsFile f(vfs, path);
    ASSERT_EQ(f.open_rc(), SQLITE_OK);
    ASSERT_EQ(f.Write(synced, 0), SQLITE_OK);
    ASSERT_EQ(f.Sync(), SQLITE_OK);
    // Unsynced: an overwrite inside the file, one past its end, a truncate.
    ASSERT_EQ(f.Write(std::string(600, 'B'), 200), SQLITE_OK);
    ASSERT_EQ(f.Write(std::string(700, 'C'), 900), SQLITE_OK);
    ASSERT_EQ(f.Truncate(1200), SQLITE_OK);
    ASSERT_EQ(ReadWholeFile(path).size(), 1200u);  // forwarded to the real file
  }
  std::ofstream(path + "-shm") << "stale";
  testutil::PowerLossReport r;
  ASSERT_TRUE(vfs_->ApplyPowerLoss(PowerLossVfs::Mode::kDiscardUnsynced, 1, &r).ok());
  EXPECT_EQ(ReadWholeFile(path), synced);
  EXPECT_EQ(r.writes_dropped, 2);
  EXPECT_EQ(r.truncates_undone, 1);
  EXPECT_EQ(r.shm_removed, 1);
  EXPECT_FALSE(fs::exists(path + "-shm"));

  // The power goes out at the 2nd counted call: that write fails, and so does everything
  // after it; closing still works. The failed write may or may not reach the disk.
  {
    VfsFile f(vfs, path);
    ASSERT_EQ(f.open_rc(), SQLITE_OK);
    vfs_->ArmCut(2);
    EXPECT_EQ(f.Write(std::string(10, 'D'), 0), SQLITE_OK);
    EXPECT_FALSE(vfs_->powered_off());
    EXPECT_EQ(f.Write(std::string(10, 'E'), 10), SQLITE_IOERR_WRITE);
    EXPECT_TRUE(vfs_->powered_off());
    std::string buf(10, '\0');
    EXPECT_EQ(f.Read(&buf, 0), SQLITE_IOERR_READ);
    EXPECT_EQ(f.Sync(), SQLITE_IOERR_FSYNC);
    EXPECT_EQ(f.Write("x", 0), SQLITE_IOERR_WRITE);
    EXPECT_NE(vfs_->last_cut().find("write of"), std::string::npos);
  }
  ASSERT_TRUE(vfs_->ApplyPowerLoss(PowerLossVfs::Mode::kDiscardUnsynced, 1, &r).ok());
  EXPECT_EQ(ReadWholeFile(path), synced);
  EXPECT_FALSE(vfs_->powered_off());

  // A cut at a sync: the data it was to make durable stays unsynced, so it is undone.
  {
    VfsFile f(vfs, path);
    vfs_->ArmCutAtSync(1);
    EXPECT_EQ(f.Write(std::string(1000, 'F'), 0), SQLITE_OK);
    EXPECT_EQ(f.Sync(), SQLITE_IOERR_FSYNC);
  }
  ASSERT_TRUE(vfs_->ApplyPowerLoss(PowerLossVfs::Mode::kDiscardUnsynced, 1, &r).ok());
  EXPECT_EQ(ReadWholeFile(path), synced);

  // Torn: every 512-byte sector of an unsynced 4 KiB write is all old or all new bytes, and
  // across power losses each outcome (kept, dropped, torn) shows up.
  const std::string fresh(4096, 'G');
  testutil::PowerLossReport sum;
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    {
      VfsFile f(vfs, path);
      ASSERT_EQ(f.Write(fresh, 0), SQLITE_OK);
    }
    ASSERT_TRUE(vfs_->ApplyPowerLoss(PowerLossVfs::Mode::kTorn, seed, &r).ok());
    AddReportTo(&sum, r);
    // Bytes past the old end that no surviving sector wrote read as zeros (a hole).
    const std::string got = ReadWholeFile(path);
    ASSERT_GE(got.size(), synced.size());
    ASSERT_LE(got.size(), fresh.size());
    std::string old = synced;
    old.resize(got.size(), '\0');
    for (size_t at = 0; at < got.size(); at += 512) {
      const std::string part = got.substr(at, 512);
      EXPECT_TRUE(part == fresh.substr(at, part.size()) || part == old.substr(at, part.size()))
          << "seed " << seed << ": the sector at " << at << " mixes old and new bytes";
    }
    // Back to the synced state for the next round.
    {
      VfsFile f(vfs, path);
      ASSERT_EQ(f.Truncate(0), SQLITE_OK);
      ASSERT_EQ(f.Write(synced, 0), SQLITE_OK);
      ASSERT_EQ(f.Sync(), SQLITE_OK);
    }
    ASSERT_TRUE(vfs_->ApplyPowerLoss(PowerLossVfs::Mode::kTorn, seed, &r).ok());
    ASSERT_EQ(ReadWholeFile(path), synced);
  }
  EXPECT_GT(sum.writes_kept, 0);
  EXPECT_GT(sum.writes_dropped, 0);
  EXPECT_GT(sum.writes_torn, 0);
  const testutil::PowerLossCounters c = vfs_->counters();
  EXPECT_EQ(c.cuts, 2);
  EXPECT_GT(c.refused_after_cut, 0);
}

// ---------------------------------------------------------------------------------------------
// Engine: the model.

// A row as the kv table stores it.
struct ModelRow {
  std::string value;
  ValueEncoding encoding = ValueEncoding::kBytes;
  int64_t version = 0;
  int64_t expire_at_ms = -1;
  bool operator==(const ModelRow&) const = default;
};

// Everything the database file holds that the test writes: the kv rows and the data version.
struct KvState {
  std::map<std::string, ModelRow> rows;
  int64_t data_version = 0;
  bool operator==(const KvState&) const = default;
};

// Data keys take byte values (some multi-page); counter keys only LE64 values and sum/min/max;
// every write also sets its own marker key, which tells after a power loss whether (and at
// which version) that write is in the database.
constexpr int kDataKeys = 40;
constexpr int kCounterKeys = 8;
// Expiry times far in the future: stored and checked, never swept during the test.
constexpr int64_t kFarFutureMs = 4102444800000;  // 2100-01-01

std::string DataKey(uint64_t i) { return "d/" + std::to_string(i % kDataKeys); }
std::string CounterKey(uint64_t i) { return "n/" + std::to_string(i % kCounterKeys); }
std::string MarkerKey(int64_t seq) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "m/%010lld", static_cast<long long>(seq));
  return buf;
}

std::string Le64(uint64_t v) {
  std::string b(8, '\0');
  for (int i = 0; i < 8; ++i) b[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  return b;
}
uint64_t FromLe64(const std::string& b) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(b[i]);
  return v;
}

// True if every check of `w` passes in `s` (a check names the version a row must have, or
// that the row must be absent; the rows never expire during the test).
bool ChecksPass(const KvState& s, const AtomicWrite& w) {
  for (const Check& c : w.checks) {
    auto it = s.rows.find(c.key);
    const bool pass = c.versionstamp.empty()
                          ? it == s.rows.end()
                          : it != s.rows.end() && StampOf(it->second.version) == c.versionstamp;
    if (!pass) return false;
  }
  return true;
}

// Applies the mutations of `w` at `version`, as one commit. REQUIRES: ChecksPass(s, w).
void Mutate(KvState& s, const AtomicWrite& w, int64_t version) {
  for (const Mutation& m : w.mutations) {
    switch (m.type) {
      case MutationType::kSet:
        s.rows[m.key] = ModelRow{m.value.data, m.value.encoding, version,
                                 m.expire_at_ms > 0 ? m.expire_at_ms : -1};
        break;
      case MutationType::kDelete:
        s.rows.erase(m.key);
        break;
      default: {  // sum/min/max of LE64 values (wrapping sum; the result never expires)
        const uint64_t op = FromLe64(m.value.data);
        auto it = s.rows.find(m.key);
        uint64_t v = op;
        if (it != s.rows.end()) {
          const uint64_t old = FromLe64(it->second.value);
          v = m.type == MutationType::kSum   ? old + op
              : m.type == MutationType::kMin ? std::min(old, op)
                                             : std::max(old, op);
        }
        s.rows[m.key] = ModelRow{Le64(v), ValueEncoding::kLe64, version, -1};
        break;
      }
    }
  }
  s.data_version = version;
}

std::string RandomBytesFrom(std::mt19937_64& rng, size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; i += 8) {
    const uint64_t x = rng();
    std::memcpy(s.data() + i, &x, std::min<size_t>(8, n - i));
  }
  return s;
}

// Mostly small values, some of a few pages and some near the 64 KiB limit (overflow chains),
// so the WAL grows and checkpoints happen.
size_t RandomValueSize(std::mt19937_64& rng) {
  switch (rng() % 10) {
    case 0:
    case 1:
    case 2:
    case 3:
    case 4:
      return rng() % 100;
    case 5:
    case 6:
      return 100 + rng() % 3000;
    case 7:
    case 8:
      return 3000 + rng() % 17000;
    default:
      return 20000 + rng() % (65536 - 20000 + 1);
  }
}

Mutation MakeSet(std::string key, std::string value, ValueEncoding enc, int64_t expire_at_ms) {
  Mutation m;
  m.key = std::move(key);
  m.type = MutationType::kSet;
  m.value = KvValue{std::move(value), enc};
  m.expire_at_ms = expire_at_ms;
  return m;
}

// A random atomic write against `s` (the acknowledged state when the write is made): checks
// that pass and that fail, sets of varied sizes with and without expiry, deletes, sum/min/max,
// and the marker of write `seq`.
AtomicWrite RandomWrite(std::mt19937_64& rng, const KvState& s, int64_t seq) {
  AtomicWrite w;
  const int checks = static_cast<int>(rng() % 3);
  for (int i = 0; i < checks; ++i) {
    const std::string key = rng() % 3 == 0 ? CounterKey(rng()) : DataKey(rng());
    auto it = s.rows.find(key);
    Check c{key, ""};
    switch (rng() % 4) {
      case 0:
      case 1:  // the current state: passes unless an earlier write in flight changes the key
        if (it != s.rows.end()) c.versionstamp = StampOf(it->second.version);
        break;
      case 2:  // must be absent
        break;
      default:  // a version the row does not have (almost always fails)
        c.versionstamp = StampOf(it != s.rows.end() ? it->second.version + 10 : 1);
        break;
    }
    w.checks.push_back(std::move(c));
  }
  const int mutations = 1 + static_cast<int>(rng() % 4);
  for (int i = 0; i < mutations; ++i) {
    const uint64_t r = rng() % 20;
    if (r < 9) {
      const int64_t expire =
          rng() % 10 < 3 ? kFarFutureMs + static_cast<int64_t>(rng() % 1000000) : 0;
      const ValueEncoding enc = rng() % 4 == 0 ? ValueEncoding::kV8 : ValueEncoding::kBytes;
      w.mutations.push_back(
          MakeSet(DataKey(rng()), RandomBytesFrom(rng, RandomValueSize(rng)), enc, expire));
    } else if (r < 12) {
      Mutation m;
      m.key = rng() % 2 == 0 ? DataKey(rng()) : CounterKey(rng());
      m.type = MutationType::kDelete;
      w.mutations.push_back(std::move(m));
    } else if (r < 18) {
      Mutation m;
      m.key = CounterKey(rng());
      static constexpr MutationType kOps[] = {MutationType::kSum, MutationType::kMin,
                                              MutationType::kMax};
      m.type = kOps[rng() % 3];
      m.value = KvValue{Le64(rng() % 4 == 0 ? rng() : rng() % 1000), ValueEncoding::kLe64};
      w.mutations.push_back(std::move(m));
    } else {
      w.mutations.push_back(
          MakeSet(CounterKey(rng()), Le64(rng() % 1000), ValueEncoding::kLe64, 0));
    }
  }
  w.mutations.push_back(MakeSet(MarkerKey(seq), "", ValueEncoding::kBytes, 0));
  return w;
}

// One write the test made and what the engine answered.
struct Attempt {
  enum class Outcome { kCommitted, kCheckFailed, kError };
  int64_t seq = 0;
  AtomicWrite write;
  Outcome outcome = Outcome::kError;
  int64_t version = 0;  // kCommitted
  std::string error;    // kError
};

Result<KvState> ReadKvState(Connection& c) {
  KvState s;
  KVC_ASSIGN_OR_RETURN(Stmt rows,
                       c.PrepareOnce("select k, v, v_encoding, version, expiration_ms from kv"));
  int rc;
  while ((rc = rows.Step()) == SQLITE_ROW) {
    s.rows[rows.ColumnBlob(0)] =
        ModelRow{rows.ColumnBlob(1), static_cast<ValueEncoding>(rows.ColumnInt64(2)),
                 rows.ColumnInt64(3), rows.ColumnInt64(4)};
  }
  if (rc != SQLITE_DONE) return c.Error("read kv");
  KVC_ASSIGN_OR_RETURN(Stmt v, c.PrepareOnce("select version from data_version where k = 0"));
  if (v.Step() != SQLITE_ROW) return c.Error("read data_version");
  s.data_version = v.ColumnInt64(0);
  return s;
}

Result<std::string> ReadDatabaseId(Connection& c) {
  KVC_ASSIGN_OR_RETURN(Stmt s,
                       c.PrepareOnce("select v from kvconnect_meta where k = 'database_id'"));
  if (s.Step() != SQLITE_ROW) return c.Error("read database id");
  return s.ColumnText(0);
}

// Up to `max` differences between what the database should hold and what it holds.
std::string DescribeDiff(const KvState& want, const KvState& got, int max = 8) {
  std::ostringstream out;
  if (want.data_version != got.data_version) {
    out << "\n  data_version: want " << want.data_version << ", got " << got.data_version;
  }
  int shown = 0;
  auto row = [](const ModelRow& r) {
    return "v" + std::to_string(r.version) + " enc " +
           std::to_string(static_cast<int>(r.encoding)) + " " + std::to_string(r.value.size()) +
           " bytes, expiry " + std::to_string(r.expire_at_ms);
  };
  for (const auto& [k, r] : want.rows) {
    auto it = got.rows.find(k);
    if (it != got.rows.end() && it->second == r) continue;
    if (++shown > max) break;
    out << "\n  " << Printable(k) << ": want " << row(r) << ", got "
        << (it == got.rows.end() ? std::string("nothing") : row(it->second));
  }
  for (const auto& [k, r] : got.rows) {
    if (shown > max) break;
    if (want.rows.count(k) != 0) continue;
    ++shown;
    out << "\n  " << Printable(k) << ": want nothing, got " << row(r);
  }
  return out.str();
}

// The change log after a power loss: one intact entry per commit since the file was made, in
// version order, each following the one before (no gap, none invented or half-written), the
// last one at the recovered data version, and replaying them from nothing gives exactly the
// recovered rows (keys, values, encodings, versions, expiries).
void VerifyChangeLog(engine::Engine& engine) {
  std::promise<void> done;
  engine.WithReader([&](storage::Reader* r, const Status& refused) {
    auto finish = [&] { done.set_value(); };
    if (!refused.ok()) {
      ADD_FAILURE() << refused.ToString();
      return finish();
    }
    std::vector<storage::ChangeLogRow> rows;
    Status s = r->ReadChangeLog(0, size_t{1} << 30, &rows);
    if (!s.ok()) {
      ADD_FAILURE() << s.ToString();
      return finish();
    }
    std::map<std::string, storage::StoredRow> replay;
    int64_t prev = 0;
    for (const storage::ChangeLogRow& row : rows) {
      auto e = storage::DecodeLoggedCommit(row.bytes);
      if (!e.ok()) {
        ADD_FAILURE() << "log entry " << row.version << ": " << e.status().ToString();
        return finish();
      }
      EXPECT_EQ(row.prev_version, prev) << "gap before log entry " << row.version;
      EXPECT_EQ(e->record.version, row.version);
      for (const storage::KeyChange& c : e->record.changes) {
        if (c.row) {
          replay[c.key] = *c.row;
        } else {
          replay.erase(c.key);
        }
      }
      prev = row.version;
    }
    if (!r->Begin().ok()) {
      ADD_FAILURE() << "begin";
      return finish();
    }
    EXPECT_EQ(prev, *r->DataVersion()) << "the log does not end at the data version";
    std::vector<Entry> entries;
    ReadRange all;
    all.end = std::string(2, '\xff');
    all.limit = 1 << 30;
    EXPECT_TRUE(r->Scan(all, 0, &entries).ok());
    size_t matched = 0;
    for (const Entry& e : entries) {
      auto it = replay.find(e.key);
      if (it == replay.end()) {
        ADD_FAILURE() << "row without a log entry: " << e.key;
        continue;
      }
      auto stored = r->Get(e.key);
      EXPECT_EQ(it->second.value, e.value);
      EXPECT_EQ(it->second.version, e.version);
      if (stored.ok() && *stored) {
        EXPECT_EQ(it->second.expire_at_ms, (*stored)->expire_at_ms);
      }
      ++matched;
    }
    EXPECT_EQ(matched, replay.size()) << "log entries for rows that are not there";
    r->End();
    finish();
  });
  done.get_future().get();
}

struct EngineRun {
  storage::SyncMode sync = storage::SyncMode::kFull;
  int cycles = kDefaultEngineCycles;
  uint64_t seed = 0;
  // Losing acknowledged writes fails the test (false: the caller expects losses and counts
  // them; the run stops at the first).
  bool loss_is_failure = true;
};

struct EngineStats {
  int cycles = 0;
  int torn_cycles = 0;
  int64_t attempted = 0;
  int64_t acknowledged = 0;
  int64_t check_failures = 0;   // answered "check failed" (nothing applied)
  int64_t errors = 0;           // answered with an error (power out)
  int64_t unacked_durable = 0;  // answered with an error, yet whole in the database afterwards
  int64_t lost = 0;             // acknowledged, missing after a power loss
  int64_t forced_checkpoints = 0;
  int64_t power_cycles_without_cut = 0;
  testutil::PowerLossCounters io;
  testutil::PowerLossReport losses;  // summed over cycles
};

const char* SyncName(storage::SyncMode m) {
  return m == storage::SyncMode::kFull     ? "full"
         : m == storage::SyncMode::kNormal ? "normal"
                                           : "off";
}

void PowerLoss::RunEngine(const EngineRun& run, EngineStats* st) {
  RunEngineCycles(run, st);
  st->io = vfs_->counters();
}

void PowerLoss::RunEngineCycles(const EngineRun& run, EngineStats* st) {
  constexpr int kMaxGroups = 24;
  constexpr int kMaxInFlight = 8;
  const std::string path = (dir_ / "kv.sqlite3").string();
  const char* sync = SyncName(run.sync);
  KvState model;                     // the acknowledged state
  std::map<int64_t, int64_t> acked;  // marker seq -> version, every acknowledged write
  std::string database_id;
  int64_t next_seq = 0;
  if (run.sync != storage::SyncMode::kFull) {
    // Below FULL not even the new file's schema is synced; make the file beforehand so the
    // power losses take acknowledged writes rather than the whole database.
    storage::SqliteOptions full;
    auto made = storage::SqliteBackend::Open(path, full);
    ASSERT_TRUE(made.ok()) << made.status().ToString();
  }
  for (int cycle = 0; cycle < run.cycles; ++cycle) {
    const uint64_t cycle_seed = CycleSeed(run.seed, cycle);
    std::mt19937_64 rng(cycle_seed);
    const PowerLossVfs::Mode mode = ModeOf(cycle);
    SCOPED_TRACE("cycle " + std::to_string(cycle) + " (" + ModeName(mode) + "); " +
                 Replay(run.seed, cycle));
    ++st->cycles;
    if (mode == PowerLossVfs::Mode::kTorn) ++st->torn_cycles;

    storage::SqliteOptions options;
    options.sync = run.sync;
    options.vfs = vfs_->name();
    auto backend = storage::SqliteBackend::Open(path, options);
    ASSERT_TRUE(backend.ok()) << backend.status().ToString();
    if (database_id.empty()) database_id = (*backend)->database_id();
    ASSERT_EQ((*backend)->database_id(), database_id);
    engine::EngineOptions eo;
    eo.change_log = true;  // as with --backup-to: each commit also logged in its transaction
    auto opened = engine::Engine::Open(std::move(*backend), eo);
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    std::unique_ptr<engine::Engine> engine = std::move(*opened);
    ASSERT_EQ(engine->committed_version(), model.data_version);
    // (Only where the power loss keeps SQLite's guarantees: not in the sync-off control.)
    if (run.sync == storage::SyncMode::kFull) VerifyChangeLog(*engine);

    // In a third of the cycles a second connection forces checkpoints, between groups and
    // while writes are in flight (besides the engine's own automatic ones).
    std::unique_ptr<Connection> side;
    if (rng() % 3 == 0) {
      side = std::make_unique<Connection>("side: ");
      ASSERT_TRUE(OpenNoCheckpointOnClose(*side, path, vfs_->name(), sync).ok());
    }
    const CutPlan cut = CutPlan::Random(rng, 5, side != nullptr, 150);
    auto checkpoint = [&] {
      const int rc = ForceCheckpoint(*side, rng);
      ++st->forced_checkpoints;
      EXPECT_TRUE(rc == SQLITE_OK || IsBusy(rc) || vfs_->powered_off())
          << "checkpoint failed with the power on: " << sqlite3_errstr(rc);
    };
    std::vector<Attempt> tail;  // every write from the first failed one on, in order
    for (int g = 0; g < kMaxGroups && tail.empty(); ++g) {
      cut.ArmBeforeStep(*vfs_, g);
      const int n = 1 + static_cast<int>(rng() % kMaxInFlight);
      std::vector<Attempt> group(static_cast<size_t>(n));
      // Shared with the callbacks, which may outlive this scope if an assertion returns early.
      auto answers =
          std::make_shared<std::vector<std::promise<Result<CommitResult>>>>(group.size());
      for (size_t i = 0; i < group.size(); ++i) {
        group[i].seq = next_seq++;
        group[i].write = RandomWrite(rng, model, group[i].seq);
      }
      // All in flight at once, so group commit batches them.
      for (size_t i = 0; i < group.size(); ++i) {
        engine->Write(group[i].write, [answers, i](Result<CommitResult> r) {
          (*answers)[i].set_value(std::move(r));
        });
      }
      if (side && rng() % 3 == 0) checkpoint();
      for (size_t i = 0; i < group.size(); ++i) {
        auto f = (*answers)[i].get_future();
        ASSERT_EQ(f.wait_for(std::chrono::seconds(60)), std::future_status::ready)
            << "no answer to a write";
        Result<CommitResult> r = f.get();
        Attempt& a = group[i];
        ++st->attempted;
        if (!r.ok()) {
          a.outcome = Attempt::Outcome::kError;
          a.error = r.status().ToString();
          ++st->errors;
        } else if (r->ok) {
          a.outcome = Attempt::Outcome::kCommitted;
          a.version = r->version;
        } else {
          a.outcome = Attempt::Outcome::kCheckFailed;
          ++st->check_failures;
        }
      }
      // Acknowledged writes, in order, into the model; the tail starts at the first error.
      for (Attempt& a : group) {
        if (!tail.empty() || a.outcome == Attempt::Outcome::kError) {
          ASSERT_NE(a.outcome, Attempt::Outcome::kCommitted)
              << "write " << a.seq << " acknowledged after an earlier one failed";
          if (tail.empty()) {
            ASSERT_TRUE(vfs_->powered_off())
                << "write " << a.seq << " failed with the power on: " << a.error;
          }
          tail.push_back(std::move(a));
          continue;
        }
        if (a.outcome == Attempt::Outcome::kCheckFailed) {
          ASSERT_FALSE(ChecksPass(model, a.write))
              << "write " << a.seq << " refused although its checks pass";
          continue;
        }
        ASSERT_TRUE(ChecksPass(model, a.write))
            << "write " << a.seq << " committed although a check fails";
        ASSERT_GT(a.version, model.data_version);
        ASSERT_LE(a.version - model.data_version, 9);
        Mutate(model, a.write, a.version);
        acked[a.seq] = a.version;
        ++st->acknowledged;
      }
      if (side && tail.empty() && (cut.ArmBeforeCheckpoint(*vfs_, g) || rng() % 2 == 0)) {
        checkpoint();  // the engine is idle: the cut, if armed, lands inside the checkpoint
      }
    }
    if (!vfs_->powered_off()) ++st->power_cycles_without_cut;

    engine->Shutdown();
    engine.reset();  // and with it the backend
    side.reset();
    testutil::PowerLossReport report;
    const Status lost_power = vfs_->ApplyPowerLoss(mode, cycle_seed ^ 0x7011u, &report);
    ASSERT_TRUE(lost_power.ok()) << lost_power.ToString();
    AddReportTo(&st->losses, report);

    // Reopen through the default VFS and compare with the model.
    Connection db("verify: ");
    ASSERT_TRUE(OpenNoCheckpointOnClose(db, path, "", sync).ok());
    const std::string integrity = IntegrityCheck(db);
    if (!run.loss_is_failure && integrity != "ok") {
      // The control (sync off): a file damaged by the power loss loses writes too.
      ++st->lost;
      return;
    }
    ASSERT_EQ(integrity, "ok");
    auto id = ReadDatabaseId(db);
    ASSERT_TRUE(id.ok()) << id.status().ToString();
    ASSERT_EQ(*id, database_id);
    auto found = ReadKvState(db);
    ASSERT_TRUE(found.ok()) << found.status().ToString();

    // The database must equal the model after some prefix of the tail: nothing acknowledged
    // lost, and each unacknowledged write wholly in or wholly out. A tail write that is in
    // the database carries its version in its marker row.
    int matched = (*found == model) ? 0 : -1;
    int durable_unacked = 0;  // tail writes applied in the matching state
    KvState candidate;
    if (matched < 0 && !tail.empty()) {
      candidate = model;
      int applied = 0;
      for (size_t i = 0; i < tail.size(); ++i) {
        const Attempt& a = tail[i];
        if (ChecksPass(candidate, a.write)) {
          if (a.outcome == Attempt::Outcome::kCheckFailed) break;  // answered otherwise
          auto marker = found->rows.find(MarkerKey(a.seq));
          if (marker == found->rows.end()) break;  // not in the database, nor any later write
          Mutate(candidate, a.write, marker->second.version);
          ++applied;
        }
        if (candidate == *found) {
          matched = static_cast<int>(i) + 1;
          durable_unacked = applied;
          break;
        }
      }
    }
    int64_t lost = 0;
    for (const auto& [seq, version] : acked) {
      auto it = found->rows.find(MarkerKey(seq));
      if (it == found->rows.end() || it->second.version != version) ++lost;
    }
    st->lost += lost;
    if (matched < 0) {
      if (run.loss_is_failure) {
        ADD_FAILURE() << "after the power loss the database matches no state the writes "
                      << "allow: " << lost
                      << " acknowledged write(s) lost; last cut: " << CutText(*vfs_) << "; "
                      << tail.size() << " unacknowledged write(s); "
                      << "differences from the acknowledged state:" << DescribeDiff(model, *found);
      }
      return;
    }
    EXPECT_EQ(lost, 0);
    if (matched > 0) {
      st->unacked_durable += durable_unacked;
      model = std::move(candidate);
    }
  }
}

void PrintEngineSummary(const char* name, uint64_t seed, const char* sync, const EngineStats& s) {
  std::cout << "[power loss] " << name << ": seed " << seed << ", sync " << sync << ", " << s.cycles
            << " cycles (" << s.torn_cycles << " torn, " << (s.cycles - s.torn_cycles)
            << " discard-unsynced), " << s.io.cuts << " cuts (" << s.io.cuts_in_wal
            << " in the WAL, " << s.io.cuts_in_database
            << " in the database file, i.e. checkpoints), " << s.power_cycles_without_cut
            << " cycles ended without a cut; writes: " << s.attempted << " attempted, "
            << s.acknowledged << " acknowledged, " << s.check_failures << " check failures, "
            << s.errors << " failed, " << s.unacked_durable
            << " failed yet durable, lost = " << s.lost << "; I/O: " << s.io.writes << " writes, "
            << s.io.syncs << " syncs, " << s.io.truncates << " truncates, "
            << s.io.refused_after_cut << " refused after cuts; forced checkpoints "
            << s.forced_checkpoints << "; at power loss: " << s.losses.writes_dropped
            << " unsynced writes dropped, " << s.losses.writes_torn << " torn, "
            << s.losses.writes_kept << " kept, " << s.losses.truncates_undone << "+"
            << s.losses.truncates_kept << " truncates undone+kept\n";
}

TEST_F(PowerLoss, Engine) {
  EngineRun run;
  run.cycles = Cycles(kDefaultEngineCycles);
  run.seed = BaseSeed();
  const std::string sync =
      std::getenv("KVC_POWER_LOSS_SYNC") ? std::getenv("KVC_POWER_LOSS_SYNC") : "full";
  run.sync = sync == "off"      ? storage::SyncMode::kOff
             : sync == "normal" ? storage::SyncMode::kNormal
                                : storage::SyncMode::kFull;
  SCOPED_TRACE("seed " + std::to_string(run.seed));
  const auto start = std::chrono::steady_clock::now();
  EngineStats st;
  RunEngine(run, &st);
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  PrintEngineSummary("engine", run.seed, SyncName(run.sync), st);
  std::cout << "[power loss] engine: " << secs << " s\n";
  RecordProperty("seed", std::to_string(run.seed));
  RecordProperty("cycles", st.cycles);
  RecordProperty("cuts", static_cast<int>(st.io.cuts));
  RecordProperty("acknowledged", static_cast<int>(st.acknowledged));
  RecordProperty("lost", static_cast<int>(st.lost));
  RecordProperty("torn_cycles", st.torn_cycles);
  if (HasFailure()) return;
  EXPECT_EQ(st.cycles, run.cycles);
  EXPECT_EQ(st.lost, 0);
  if (run.cycles >= 20) {  // the run really exercised what it claims to
    EXPECT_GT(st.io.cuts, run.cycles / 2);
    EXPECT_GT(st.acknowledged, 0);
    EXPECT_GT(st.errors, 0);
    EXPECT_GT(st.check_failures, 0);
    EXPECT_GT(st.losses.writes_dropped, 0);
    EXPECT_GT(st.losses.writes_torn, 0);
  }
}

// The control: with fsync off, acknowledged writes live only in the OS cache, so the power
// loss must take some of them away, and the engine test's check must notice. If it does not,
// the shim does not drop what it should and the tests above prove nothing.
TEST_F(PowerLoss, EngineCheckFindsLossWithSyncOff) {
  EngineRun run;
  run.sync = storage::SyncMode::kOff;
  run.cycles = 10;
  run.seed = BaseSeed();
  run.loss_is_failure = false;
  SCOPED_TRACE("seed " + std::to_string(run.seed));
  EngineStats st;
  RunEngine(run, &st);
  PrintEngineSummary("engine, sync off (control)", run.seed, "off", st);
  EXPECT_GT(st.lost, 0) << "no acknowledged write was lost with sync off in " << st.cycles
                        << " cycles: the power loss simulation drops nothing";
}

// ---------------------------------------------------------------------------------------------
// Catalog.

struct CatalogState {
  std::map<std::string, storage::DatabaseRecord> databases;  // by id
  std::map<std::string, storage::AccessTokenRecord> tokens;  // by id
  int64_t generation = 0;
};

bool Same(const storage::DatabaseRecord& a, const storage::DatabaseRecord& b) {
  return a.id == b.id && a.name == b.name && a.location == b.location &&
         a.created_ms == b.created_ms;
}
bool Same(const storage::AccessTokenRecord& a, const storage::AccessTokenRecord& b) {
  return a.id == b.id && a.name == b.name && a.database_ids == b.database_ids &&
         a.all_databases == b.all_databases && a.scope == b.scope && a.hash == b.hash &&
         a.created_ms == b.created_ms && a.expires_ms == b.expires_ms &&
         a.revoked_ms == b.revoked_ms && a.rate_limit == b.rate_limit;
}
template <typename Map>
bool SameRecords(const Map& a, const Map& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [id, r] : a) {
    auto it = b.find(id);
    if (it == b.end() || !Same(r, it->second)) return false;
  }
  return true;
}
bool Same(const CatalogState& a, const CatalogState& b) {
  return a.generation == b.generation && SameRecords(a.databases, b.databases) &&
         SameRecords(a.tokens, b.tokens);
}

std::string Describe(const CatalogState& s) {
  std::ostringstream out;
  out << "generation " << s.generation << "; databases:";
  for (const auto& [id, d] : s.databases) out << " " << d.name << "=" << id.substr(0, 8);
  out << "; tokens:";
  for (const auto& [id, t] : s.tokens) {
    out << " " << id << (t.revoked_ms != 0 ? "(revoked)" : "") << "->";
    if (t.all_databases) out << "all";
    for (const std::string& db : t.database_ids) out << db.substr(0, 8) << ",";
  }
  return out.str();
}

struct CatalogOp {
  enum class Kind { kAddDatabase, kAddToken, kRevokeToken, kRenameDatabase, kRemoveDatabase };
  Kind kind = Kind::kAddDatabase;
  storage::DatabaseRecord database;  // kAddDatabase
  bool make_storage = false;         // kAddDatabase: Storage::Create the file first
  storage::AccessTokenRecord token;  // kAddToken
  std::string id;                    // the token (revoke) or database (rename, remove)
  std::string new_name;              // kRenameDatabase
  int64_t now_ms = 0;                // kRevokeToken, kRemoveDatabase
};

// The answer the catalog owes `op` in state *s; applies `op` to *s when it is OK.
StatusCode ApplyCatalogOp(CatalogState* s, const CatalogOp& op) {
  switch (op.kind) {
    case CatalogOp::Kind::kAddDatabase:
      for (const auto& [id, d] : s->databases) {
        if (id == op.database.id || d.name == op.database.name) return StatusCode::kAlreadyExists;
      }
      s->databases[op.database.id] = op.database;
      break;
    case CatalogOp::Kind::kAddToken:
      if (s->tokens.count(op.token.id) != 0) return StatusCode::kAlreadyExists;
      s->tokens[op.token.id] = op.token;
      break;
    case CatalogOp::Kind::kRevokeToken: {
      auto it = s->tokens.find(op.id);
      if (it == s->tokens.end()) return StatusCode::kNotFound;
      if (it->second.revoked_ms != 0) return StatusCode::kAlreadyExists;
      it->second.revoked_ms = op.now_ms;
      break;
    }
    case CatalogOp::Kind::kRenameDatabase: {
      for (const auto& [id, d] : s->databases) {
        if (d.name == op.new_name) return StatusCode::kAlreadyExists;
      }
      auto it = s->databases.find(op.id);
      if (it == s->databases.end()) return StatusCode::kNotFound;
      it->second.name = op.new_name;
      break;
    }
    case CatalogOp::Kind::kRemoveDatabase: {
      if (s->databases.erase(op.id) == 0) return StatusCode::kNotFound;
      // A token of several databases loses this one; a token of only this one is revoked
      // (and keeps it on its list); an all-databases token stays as it is.
      for (auto& [id, t] : s->tokens) {
        if (t.all_databases) continue;
        auto at = std::find(t.database_ids.begin(), t.database_ids.end(), op.id);
        if (at == t.database_ids.end()) continue;
        if (t.database_ids.size() > 1) {
          t.database_ids.erase(at);
        } else if (t.revoked_ms == 0) {
          t.revoked_ms = op.now_ms;
        }
      }
      break;
    }
  }
  ++s->generation;
  return StatusCode::kOk;
}

std::string HexFrom(std::mt19937_64& rng, size_t bytes) {
  return HexEncode(RandomBytesFrom(rng, bytes));
}
std::string UuidFrom(std::mt19937_64& rng) {
  const std::string h = HexFrom(rng, 16);
  return h.substr(0, 8) + "-" + h.substr(8, 4) + "-4" + h.substr(13, 3) + "-a" + h.substr(17, 3) +
         "-" + h.substr(20, 12);
}

// A random catalog change against `s`; mostly valid ones, some that must be refused.
CatalogOp RandomCatalogOp(std::mt19937_64& rng, const CatalogState& s, int64_t* counter) {
  const int64_t n = ++*counter;
  const int64_t now = 1700000000000 + n;
  std::vector<std::string> others;  // databases other than "default"
  for (const auto& [id, d] : s.databases) {
    if (d.name != storage::kDefaultDatabase) others.push_back(id);
  }
  std::vector<std::string> tokens;
  for (const auto& [id, t] : s.tokens) tokens.push_back(id);
  auto pick = [&rng](const std::vector<std::string>& v) { return v[rng() % v.size()]; };
  auto any_name = [&]() {
    return std::next(s.databases.begin(), static_cast<std::ptrdiff_t>(rng() % s.databases.size()))
        ->second.name;
  };

  CatalogOp op;
  const uint64_t r = rng() % 20;
  if (r < 4 || s.databases.empty()) {
    op.kind = CatalogOp::Kind::kAddDatabase;
    op.database.id = UuidFrom(rng);
    op.database.name =
        rng() % 10 == 0 && !s.databases.empty() ? any_name() : "db-" + std::to_string(n);
    op.database.location = "db-" + HexFrom(rng, 8) + ".sqlite3";
    op.database.created_ms = now;
    op.make_storage = rng() % 3 == 0;
  } else if (r < 11) {
    op.kind = CatalogOp::Kind::kAddToken;
    op.token.id = rng() % 20 == 0 && !tokens.empty() ? pick(tokens) : "t" + HexFrom(rng, 6);
    op.token.name = "token " + std::to_string(n);
    // One database mostly; some tokens of several, some of all.
    const uint64_t shape = rng() % 6;
    op.token.all_databases = shape == 0;
    const uint64_t count = shape == 0 ? 0 : shape < 4 ? 1 : 1 + rng() % 3;
    for (uint64_t i = 0; i < count; ++i) {
      std::string id =
          std::next(s.databases.begin(), static_cast<std::ptrdiff_t>(rng() % s.databases.size()))
              ->first;
      if (std::find(op.token.database_ids.begin(), op.token.database_ids.end(), id) ==
          op.token.database_ids.end()) {
        op.token.database_ids.push_back(std::move(id));
      }
    }
    op.token.scope = static_cast<int>(rng() % 8);
    op.token.hash = HexFrom(rng, 32);
    op.token.created_ms = now;
    op.token.expires_ms = rng() % 2 == 0 ? 0 : now + 86400000;
    static constexpr double kRates[] = {-1, 0, 2.5, 100};
    op.token.rate_limit = kRates[rng() % 4];
  } else if (r < 15) {
    op.kind = CatalogOp::Kind::kRevokeToken;
    op.id = tokens.empty() || rng() % 8 == 0 ? "t-missing" : pick(tokens);
    op.now_ms = now;
  } else if (r < 18 && !others.empty()) {
    op.kind = CatalogOp::Kind::kRenameDatabase;
    op.id = rng() % 10 == 0 ? UuidFrom(rng) : pick(others);
    op.new_name = rng() % 6 == 0 ? any_name() : "renamed-" + std::to_string(n);
  } else if (!others.empty()) {
    op.kind = CatalogOp::Kind::kRemoveDatabase;
    op.id = pick(others);
    op.now_ms = now;
  } else {
    op.kind = CatalogOp::Kind::kRevokeToken;
    op.id = "t-missing";
    op.now_ms = now;
  }
  return op;
}

Status ExecuteCatalogOp(storage::Storage& storage, CatalogOp& op) {
  storage::Catalog& c = storage.catalog();
  switch (op.kind) {
    case CatalogOp::Kind::kAddDatabase:
      if (op.make_storage) {  // as `db create` does: the file first, then the catalog row
        KVC_ASSIGN_OR_RETURN(storage::DatabaseRecord made, storage.Create(op.database.name));
        op.database.id = made.id;
        op.database.location = made.location;
      }
      return c.AddDatabase(op.database);
    case CatalogOp::Kind::kAddToken:
      return c.AddToken(op.token);
    case CatalogOp::Kind::kRevokeToken:
      return c.RevokeToken(op.id, op.now_ms);
    case CatalogOp::Kind::kRenameDatabase:
      return c.RenameDatabase(op.id, op.new_name);
    case CatalogOp::Kind::kRemoveDatabase:
      return c.RemoveDatabase(op.id, op.now_ms);
  }
  return Internal("unknown op");
}

Result<CatalogState> ReadCatalogFile(Connection& c) {
  CatalogState s;
  KVC_ASSIGN_OR_RETURN(Stmt dbs, c.PrepareOnce("select id, name, path, created_ms from databases"));
  int rc;
  while ((rc = dbs.Step()) == SQLITE_ROW) {
    storage::DatabaseRecord d{dbs.ColumnText(0), dbs.ColumnText(1), dbs.ColumnText(2),
                              dbs.ColumnInt64(3)};
    s.databases[d.id] = d;
  }
  if (rc != SQLITE_DONE) return c.Error("read databases");
  KVC_ASSIGN_OR_RETURN(Stmt toks, c.PrepareOnce("select id, name, database_id, scope, hash, "
                                                "created_ms, expires_ms, revoked_ms, rate_limit, "
                                                "database_ids, all_databases from access_tokens"));
  while ((rc = toks.Step()) == SQLITE_ROW) {
    storage::AccessTokenRecord t;
    t.id = toks.ColumnText(0);
    t.name = toks.ColumnText(1);
    t.all_databases = toks.ColumnInt64(10) != 0;
    t.database_ids =
        storage::DecodeTokenDatabases(toks.ColumnText(9), toks.ColumnText(2), t.all_databases);
    t.scope = static_cast<int>(toks.ColumnInt64(3));
    t.hash = toks.ColumnText(4);
    t.created_ms = toks.ColumnInt64(5);
    t.expires_ms = toks.ColumnInt64(6);
    t.revoked_ms = toks.ColumnInt64(7);
    t.rate_limit = toks.ColumnDouble(8);
    s.tokens[t.id] = t;
  }
  if (rc != SQLITE_DONE) return c.Error("read access_tokens");
  KVC_ASSIGN_OR_RETURN(Stmt gen,
                       c.PrepareOnce("select v from catalog_meta where k = 'generation'"));
  if (gen.Step() != SQLITE_ROW) return c.Error("read generation");
  s.generation = gen.ColumnInt64(0);
  return s;
}

// What the catalog lists, as a state (generation from ChangeCounter).
Result<CatalogState> ListCatalog(storage::Catalog& c) {
  CatalogState s;
  KVC_ASSIGN_OR_RETURN(auto dbs, c.ListDatabases());
  for (auto& d : dbs) s.databases[d.id] = d;
  KVC_ASSIGN_OR_RETURN(auto toks, c.ListTokens());
  for (auto& t : toks) s.tokens[t.id] = t;
  KVC_ASSIGN_OR_RETURN(s.generation, c.ChangeCounter());
  return s;
}

TEST_F(PowerLoss, Catalog) {
  const int cycles = Cycles(kDefaultCatalogCycles);
  const uint64_t seed = BaseSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const auto start = std::chrono::steady_clock::now();
  const std::string data_dir = (dir_ / "data").string();
  const std::string catalog_path = (dir_ / "data" / "catalog.sqlite3").string();
  CatalogState model;
  int64_t counter = 0;
  int torn = 0, ops = 0, acknowledged = 0, refused = 0, failed = 0, unacked_durable = 0;
  int64_t forced_checkpoints = 0, without_cut = 0;
  for (int cycle = 0; cycle < cycles; ++cycle) {
    const uint64_t cycle_seed = CycleSeed(seed, cycle);
    std::mt19937_64 rng(cycle_seed);
    const PowerLossVfs::Mode mode = ModeOf(cycle);
    if (mode == PowerLossVfs::Mode::kTorn) ++torn;
    SCOPED_TRACE("cycle " + std::to_string(cycle) + " (" + ModeName(mode) + "); " +
                 Replay(seed, cycle));

    storage::StorageOptions options{.location = data_dir, .vfs = vfs_->name()};
    auto opened = storage::OpenStorage(options);
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    std::unique_ptr<storage::Storage> storage = std::move(*opened);
    // The catalog opens and lists what survived; opening is itself one transaction.
    auto listed = ListCatalog(storage->catalog());
    ASSERT_TRUE(listed.ok()) << listed.status().ToString();
    if (cycle > 0) {
      ASSERT_TRUE(SameRecords(listed->databases, model.databases) &&
                  SameRecords(listed->tokens, model.tokens))
          << "listed: " << Describe(*listed) << "\nmodel: " << Describe(model);
      ASSERT_EQ(listed->generation, model.generation + 1);
    }
    model = std::move(*listed);

    std::unique_ptr<Connection> side;
    if (rng() % 3 == 0) {
      side = std::make_unique<Connection>("side: ");
      ASSERT_TRUE(OpenNoCheckpointOnClose(*side, catalog_path, vfs_->name(), "full").ok());
    }
    const int planned = 3 + static_cast<int>(rng() % 15);
    const CutPlan cut = CutPlan::Random(rng, planned, side != nullptr, 30);
    std::vector<CatalogOp> tail;
    // Past the planned changes, more until an armed cut has happened (or 30 more).
    for (int i = 0; i < planned || (cut.where != CutPlan::Where::kNone && !vfs_->powered_off() &&
                                    i < planned + 30);
         ++i) {
      if (side && (cut.ArmBeforeCheckpoint(*vfs_, i) || rng() % 3 == 0)) {
        const int rc = ForceCheckpoint(*side, rng);
        ++forced_checkpoints;
        EXPECT_TRUE(rc == SQLITE_OK || IsBusy(rc) || vfs_->powered_off())
            << "checkpoint failed with the power on: " << sqlite3_errstr(rc);
      }
      cut.ArmBeforeStep(*vfs_, i);
      CatalogOp op = RandomCatalogOp(rng, model, &counter);
      const Status s = ExecuteCatalogOp(*storage, op);
      ++ops;
      if (!tail.empty()) {  // after a failure: one more attempt, which must fail too
        ASSERT_FALSE(s.ok()) << "a catalog change succeeded after an earlier one failed";
        tail.push_back(std::move(op));
        ++failed;
        break;
      }
      CatalogState after = model;
      const StatusCode want = ApplyCatalogOp(&after, op);
      if (s.ok()) {
        ASSERT_EQ(want, StatusCode::kOk) << "the catalog accepted a change it must refuse";
        model = std::move(after);
        ++acknowledged;
      } else if (s.code() == StatusCode::kAlreadyExists || s.code() == StatusCode::kNotFound) {
        ASSERT_EQ(s.code(), want) << s.ToString();
        ++refused;
      } else {
        ASSERT_TRUE(vfs_->powered_off())
            << "catalog change failed with the power on: " << s.ToString();
        tail.push_back(std::move(op));
        ++failed;
      }
    }
    if (!vfs_->powered_off()) ++without_cut;
    storage.reset();
    side.reset();
    testutil::PowerLossReport report;
    const Status lost_power = vfs_->ApplyPowerLoss(mode, cycle_seed ^ 0xca7u, &report);
    ASSERT_TRUE(lost_power.ok()) << lost_power.ToString();

    Connection db("verify: ");
    ASSERT_TRUE(OpenNoCheckpointOnClose(db, catalog_path, "", "full").ok());
    ASSERT_EQ(IntegrityCheck(db), "ok");
    auto found = ReadCatalogFile(db);
    ASSERT_TRUE(found.ok()) << found.status().ToString();
    // Every acknowledged change, then some prefix of the failed ones, each whole.
    int matched = Same(*found, model) ? 0 : -1;
    CatalogState candidate = model;
    int applied = 0;
    for (size_t i = 0; matched < 0 && i < tail.size(); ++i) {
      if (ApplyCatalogOp(&candidate, tail[i]) == StatusCode::kOk) ++applied;
      if (Same(*found, candidate)) matched = static_cast<int>(i) + 1;
    }
    ASSERT_GE(matched, 0) << "after the power loss the catalog matches no state the changes "
                          << "allow; last cut at " << vfs_->last_cut()
                          << "\nfound: " << Describe(*found)
                          << "\nacknowledged: " << Describe(model);
    if (matched > 0) {
      unacked_durable += applied;
      model = std::move(candidate);
    }
  }
  // The last state opens through the default VFS too.
  {
    auto opened = storage::OpenStorage(storage::StorageOptions{.location = data_dir});
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    auto listed = ListCatalog((*opened)->catalog());
    ASSERT_TRUE(listed.ok()) << listed.status().ToString();
    EXPECT_TRUE(SameRecords(listed->databases, model.databases) &&
                SameRecords(listed->tokens, model.tokens))
        << "listed: " << Describe(*listed) << "\nmodel: " << Describe(model);
  }
  const testutil::PowerLossCounters io = vfs_->counters();
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "[power loss] catalog: seed " << seed << ", " << cycles << " cycles (" << torn
            << " torn), " << io.cuts << " cuts (" << io.cuts_in_wal << " in the WAL, "
            << io.cuts_in_database << " in a database file), " << without_cut
            << " cycles ended without a cut; changes: " << ops << " attempted, " << acknowledged
            << " acknowledged, " << refused << " refused as they must be, " << failed << " failed, "
            << unacked_durable << " failed yet durable, lost = 0; databases "
            << model.databases.size() << ", tokens " << model.tokens.size()
            << "; forced checkpoints " << forced_checkpoints << "; " << secs << " s\n";
  RecordProperty("seed", std::to_string(seed));
  RecordProperty("cycles", cycles);
  RecordProperty("cuts", static_cast<int>(io.cuts));
  RecordProperty("acknowledged", acknowledged);
  RecordProperty("lost", 0);
  RecordProperty("torn_cycles", torn);
  if (cycles >= 20) {
    EXPECT_GT(io.cuts, cycles / 2);
    EXPECT_GT(acknowledged, 0);
    EXPECT_GT(refused, 0);
    EXPECT_GT(failed, 0);
  }
}

}  // namespace
}  // namespace kvc
