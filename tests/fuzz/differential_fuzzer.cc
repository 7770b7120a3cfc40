// Differential fuzzing of the engine: the input is decoded into a sequence of atomic writes
// (checks, set, delete, LE64 sum/min/max over six keys) applied both to the real engine on a
// fresh SQLite file and to the independent in-memory model (tests/testutil/kv_model.h). Every
// outcome (applied, check failed, error) and, after every write, every row must agree; any
// disagreement aborts.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <future>

#include "common/random.h"
#include "engine/engine.h"
#include "storage/sqlite/sqlite_backend.h"
#include "testutil/kv_model.h"

namespace {
using namespace kvc;

class Bytes {
 public:
  Bytes(const uint8_t* d, size_t n) : d_(d), n_(n) {}
  bool empty() const { return i_ >= n_; }
  uint8_t Next() { return i_ < n_ ? d_[i_++] : 0; }
  uint64_t Next64() {
    uint64_t v = 0;
    for (int k = 0; k < 8; ++k) v = (v << 8) | Next();
    return v;
  }

 private:
  const uint8_t* d_;
  size_t n_;
  size_t i_ = 0;
};

Mutation Le64(const std::string& k, MutationType t, uint64_t v) {
  Mutation m;
  m.key = k;
  m.type = t;
  std::string b(8, '\0');
  for (int i = 0; i < 8; ++i) b[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  m.value = KvValue{b, ValueEncoding::kLe64};
  return m;
}

[[noreturn]] void Fail(const char* what, int op) {
  std::fprintf(stderr, "differential mismatch at write %d: %s\n", op, what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string dir = [] {
    const char* shm = "/dev/shm";
    std::string base = std::filesystem::exists(shm) ? shm : std::filesystem::temp_directory_path();
    return base + "/kvc-diff-fuzz-" + std::to_string(getpid());
  }();
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  storage::SqliteOptions so;
  so.sync = storage::SyncMode::kOff;
  auto backend = storage::SqliteBackend::Open(dir + "/db.sqlite3", so);
  if (!backend.ok()) std::abort();
  engine::EngineOptions eo;
  eo.reader_threads = 1;
  auto engine = engine::Engine::Open(std::move(*backend), eo);
  if (!engine.ok()) std::abort();

  static const char* kKeys[] = {"a", "b", "c", "d", "e", "f"};
  testutil::KvModel model;
  Bytes in(data, size);
  int64_t last_version = 0;
  for (int op = 0; !in.empty() && op < 64; ++op) {
    AtomicWrite w;
    const uint8_t head = in.Next();
    const int nchecks = head % 3;
    for (int c = 0; c < nchecks; ++c) {
      const uint8_t b = in.Next();
      const std::string k = kKeys[b % 6];
      Check chk{k, ""};
      auto it = model.rows.find(k);
      if ((b >> 3) % 4 == 1 && it != model.rows.end()) {
        chk.versionstamp = testutil::StampOf(it->second.version);
      } else if ((b >> 3) % 4 == 2) {
        chk.versionstamp = testutil::StampOf(1 + (b >> 5));  // probably stale
      }
      w.checks.push_back(chk);
    }
    const int nmut = 1 + (head >> 2) % 4;
    for (int m = 0; m < nmut; ++m) {
      const uint8_t b = in.Next();
      const std::string k = kKeys[b % 6];
      switch ((b >> 3) % 6) {
        case 0: {
          Mutation s;
          s.key = k;
          s.type = MutationType::kSet;
          s.value = KvValue{std::string(1 + in.Next() % 8, static_cast<char>(in.Next())),
                            ValueEncoding::kBytes};
          w.mutations.push_back(s);
          break;
        }
        case 1: {
          Mutation d;
          d.key = k;
          d.type = MutationType::kDelete;
          w.mutations.push_back(d);
          break;
        }
        case 2:
          w.mutations.push_back(Le64(k, MutationType::kSum, in.Next64()));
          break;
        case 3:
          w.mutations.push_back(Le64(k, MutationType::kMin, in.Next64()));
          break;
        case 4:
          w.mutations.push_back(Le64(k, MutationType::kMax, in.Next64()));
          break;
        default:
          w.mutations.push_back(Le64(k, MutationType::kSet, in.Next64()));
          break;
      }
    }
    std::promise<Result<CommitResult>> p;
    (*engine)->Write(w, [&](Result<CommitResult> r) { p.set_value(std::move(r)); });
    auto r = p.get_future().get();
    if (r.ok() && r->ok) {
      if (r->version <= last_version) Fail("versionstamp did not increase", op);
      last_version = r->version;
      if (model.Apply(w, r->version) != 1) Fail("engine applied, model refused", op);
    } else if (r.ok()) {
      if (model.Apply(w, 0) != 0) Fail("engine check failed, model did not", op);
    } else {
      if (r.status().code() != StatusCode::kInvalidArgument) Fail("unexpected error code", op);
      if (model.Apply(w, 0) != -1) Fail("engine error, model accepted", op);
    }
    std::promise<Result<engine::ReadResult>> rp;
    (*engine)->SnapshotRead({ReadRange{"", "\xff", 1000, false}},
                            [&](Result<engine::ReadResult> rr) { rp.set_value(std::move(rr)); });
    auto read = rp.get_future().get();
    if (!read.ok()) Fail("read failed", op);
    const auto& rows = read->ranges[0];
    if (rows.size() != model.rows.size()) Fail("row count differs", op);
    for (const Entry& e : rows) {
      auto it = model.rows.find(e.key);
      if (it == model.rows.end()) Fail("row missing from the model", op);
      if (e.value != it->second.value || e.version != it->second.version ||
          e.encoding != it->second.enc) {
        Fail("row differs", op);
      }
    }
  }
  (*engine)->Shutdown();
  return 0;
}
