#include "storage/postgres/pg_conn.h"

#include <libpq-fe.h>
#include <poll.h>

#include <cstring>

namespace kvc::storage::pg {
namespace {

uint64_t ReadBigEndian(const char* p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

std::string BigEndian(uint64_t v, int n) {
  std::string out(static_cast<size_t>(n), '\0');
  for (int i = n - 1; i >= 0; --i) {
    out[static_cast<size_t>(i)] = static_cast<char>(v & 0xff);
    v >>= 8;
  }
  return out;
}

std::string Trimmed(const char* msg) {
  std::string s = msg ? msg : "";
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s.empty() ? "unknown error" : s;
}

}  // namespace

Params& Params::Add(std::string bytes, int format) {
  storage_.push_back(std::move(bytes));
  formats_.push_back(format);
  return *this;
}

const char* const* Params::values() const {
  values_.clear();
  for (const std::string& s : storage_) values_.push_back(s.data());
  return values_.data();
}

const int* Params::lengths() const {
  lengths_.clear();
  for (const std::string& s : storage_) lengths_.push_back(static_cast<int>(s.size()));
  return lengths_.data();
}

Params& Params::Text(std::string_view s) { return Add(std::string(s), 0); }
Params& Params::Bytes(std::string_view b) { return Add(std::string(b), 1); }
Params& Params::Int64(int64_t v) { return Add(BigEndian(static_cast<uint64_t>(v), 8), 1); }
Params& Params::Int32(int32_t v) { return Add(BigEndian(static_cast<uint32_t>(v), 4), 1); }
Params& Params::Double(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return Add(buf, 0);
}

namespace {

// PostgreSQL's binary array format: ndim, has-nulls flag, element type, then the length and
// lower bound of the one dimension, then each element as its length and bytes.
template <typename T, typename Encode>
std::string ArrayOf(const std::vector<T>& items, uint32_t element_oid, Encode encode) {
  std::string out;
  out += BigEndian(items.empty() ? 0 : 1, 4);
  out += BigEndian(0, 4);
  out += BigEndian(element_oid, 4);
  if (!items.empty()) {
    out += BigEndian(items.size(), 4);
    out += BigEndian(1, 4);
  }
  for (const T& item : items) {
    const std::string bytes = encode(item);
    out += BigEndian(bytes.size(), 4);
    out += bytes;
  }
  return out;
}

constexpr uint32_t kByteaOid = 17;
constexpr uint32_t kInt8Oid = 20;
constexpr uint32_t kInt4Oid = 23;

}  // namespace

Params& Params::BytesArray(const std::vector<std::string>& v) {
  return Add(ArrayOf(v, kByteaOid, [](const std::string& s) { return s; }), 1);
}
Params& Params::Int64Array(const std::vector<int64_t>& v) {
  return Add(ArrayOf(v, kInt8Oid, [](int64_t x) { return BigEndian(static_cast<uint64_t>(x), 8); }),
             1);
}
Params& Params::Int32Array(const std::vector<int32_t>& v) {
  return Add(ArrayOf(v, kInt4Oid, [](int32_t x) { return BigEndian(static_cast<uint32_t>(x), 4); }),
             1);
}

PgResult& PgResult::operator=(PgResult&& o) noexcept {
  if (this != &o) {
    if (r_) PQclear(r_);
    r_ = std::exchange(o.r_, nullptr);
  }
  return *this;
}

PgResult::~PgResult() {
  if (r_) PQclear(r_);
}

int PgResult::rows() const { return r_ ? PQntuples(r_) : 0; }
bool PgResult::IsNull(int row, int col) const { return PQgetisnull(r_, row, col) != 0; }

int64_t PgResult::Int(int row, int col) const {
  const char* p = PQgetvalue(r_, row, col);
  const int len = PQgetlength(r_, row, col);
  if (PQfformat(r_, col) == 0) return std::strtoll(p, nullptr, 10);
  const uint64_t u = ReadBigEndian(p, len);
  switch (len) {
    case 2:
      return static_cast<int16_t>(u);
    case 4:
      return static_cast<int32_t>(u);
    default:
      return static_cast<int64_t>(u);
  }
}

std::string PgResult::Bytes(int row, int col) const {
  return std::string(PQgetvalue(r_, row, col), static_cast<size_t>(PQgetlength(r_, row, col)));
}

double PgResult::Double(int row, int col) const {
  const char* p = PQgetvalue(r_, row, col);
  if (PQfformat(r_, col) == 0) return std::strtod(p, nullptr);
  const uint64_t u = ReadBigEndian(p, 8);
  double d;
  std::memcpy(&d, &u, sizeof d);
  return d;
}

int64_t PgResult::Affected() const {
  const char* n = r_ ? PQcmdTuples(r_) : "";
  return *n ? std::strtoll(n, nullptr, 10) : 0;
}

Connection::Connection(std::string conninfo, std::map<std::string, std::string> overrides,
                       std::string what)
    : conninfo_(std::move(conninfo)), overrides_(std::move(overrides)), what_(std::move(what)) {}

Connection::~Connection() { Close(); }

void Connection::Close() {
  if (conn_) PQfinish(conn_);
  conn_ = nullptr;
  prepared_.clear();
  forgotten_ = false;
}

Status Connection::SendAndForget(const char* sql) {
  KVC_RETURN_IF_ERROR(Ensure());
  Drain();
  if (!PQsendQueryParams(conn_, sql, 0, nullptr, nullptr, nullptr, nullptr, 1)) {
    Status s = Error("send");
    Close();
    return s;
  }
  forgotten_ = true;
  Status s = Flush("send");
  if (!s.ok()) Close();
  return s;
}

void Connection::Drain() {
  if (!forgotten_ || !conn_) return;
  forgotten_ = false;
  while (PGresult* r = PQgetResult(conn_)) PQclear(r);
}

Status Connection::Connect() {
  Close();
  char* err = nullptr;
  PQconninfoOption* opts = PQconninfoParse(conninfo_.c_str(), &err);
  if (!opts) {
    std::string msg = Trimmed(err);
    if (err) PQfreemem(err);
    return InvalidArgument("the PostgreSQL connection string is not valid: " + msg);
  }
  std::map<std::string, std::string> settings;
  for (PQconninfoOption* o = opts; o->keyword; ++o) {
    if (o->val && *o->val) settings[o->keyword] = o->val;
  }
  PQconninfoFree(opts);
  for (const auto& [k, v] : overrides_) settings[k] = v;
  if (!settings.count("connect_timeout")) settings["connect_timeout"] = "10";
  std::vector<const char*> keys;
  std::vector<const char*> vals;
  for (const auto& [k, v] : settings) {
    keys.push_back(k.c_str());
    vals.push_back(v.c_str());
  }
  keys.push_back(nullptr);
  vals.push_back(nullptr);
  conn_ = PQconnectdbParams(keys.data(), vals.data(), 0);
  if (!conn_ || PQstatus(conn_) != CONNECTION_OK) {
    Status s = IoError(what_ + " connect: " + Trimmed(conn_ ? PQerrorMessage(conn_) : "no memory"));
    Close();
    return s;
  }
  PQsetnonblocking(conn_, 1);
  PQsetNoticeProcessor(
      conn_, [](void*, const char*) {}, nullptr);  // "already exists" notices
  return Status::Ok();
}

bool Connection::connected() const { return conn_ && PQstatus(conn_) == CONNECTION_OK; }

Status Connection::Ensure() {
  if (connected()) {
    Drain();
    if (connected()) return Status::Ok();
  }
  if (pinned_) return IoError(what_ + ": the connection was lost inside a transaction");
  return Connect();
}

void Connection::CloseIfEndedByServer() {
  if (!connected()) return;
  Drain();
  // Input while idle is a notification, a notice or a parameter change, or the server's goodbye:
  // a message, then EOF, which a later read reports. Read and parse until nothing is left.
  for (int i = 0; i < 8; ++i) {
    pollfd p{PQsocket(conn_), POLLIN, 0};
    if (::poll(&p, 1, 0) <= 0) return;  // nothing (more) arrived
    if (!PQconsumeInput(conn_) || PQstatus(conn_) != CONNECTION_OK) {
      Close();
      return;
    }
    (void)PQisBusy(conn_);  // parses what was read
  }
}

int Connection::socket() const { return conn_ ? PQsocket(conn_) : -1; }

Status Connection::Error(std::string_view context) const {
  return IoError(what_ + " " + std::string(context) + ": " +
                 Trimmed(conn_ ? PQerrorMessage(conn_) : "not connected"));
}

Status Connection::CheckResult(const PgResult& r, std::string_view context) const {
  if (!r.get()) return Error(context);
  switch (PQresultStatus(r.get())) {
    case PGRES_COMMAND_OK:
    case PGRES_TUPLES_OK:
    case PGRES_PIPELINE_SYNC:
      return Status::Ok();
    case PGRES_PIPELINE_ABORTED:
      return IoError(what_ + " " + std::string(context) + ": skipped after an earlier failure");
    default:
      return IoError(what_ + " " + std::string(context) + ": " +
                     Trimmed(PQresultErrorMessage(r.get())));
  }
}

void Connection::Define(const std::string& name, std::string sql) {
  defined_[name] = std::move(sql);
}

Status Connection::PrepareIfNeeded(const std::string& name) {
  if (prepared_.count(name)) return Status::Ok();
  auto it = defined_.find(name);
  if (it == defined_.end()) return Internal("postgres statement '" + name + "' is not defined");
  PgResult r(PQprepare(conn_, name.c_str(), it->second.c_str(), 0, nullptr));
  KVC_RETURN_IF_ERROR(CheckResult(r, "prepare " + name));
  prepared_.insert(name);
  return Status::Ok();
}

Status Connection::Flush(std::string_view context) {
  for (;;) {
    const int f = PQflush(conn_);
    if (f == 0) return Status::Ok();
    if (f < 0) return Error(context);
    pollfd p{PQsocket(conn_), POLLIN | POLLOUT, 0};
    if (::poll(&p, 1, 30000) <= 0)
      return IoError(what_ + " " + std::string(context) + ": timed out");
    if ((p.revents & POLLIN) && !PQconsumeInput(conn_)) return Error(context);
  }
}

Result<PgResult> Connection::Run(const std::string& name, const Params& params) {
  KVC_RETURN_IF_ERROR(Ensure());
  KVC_RETURN_IF_ERROR(PrepareIfNeeded(name));
  PgResult r(PQexecPrepared(conn_, name.c_str(), params.size(), params.values(), params.lengths(),
                            params.formats(), 1));
  KVC_RETURN_IF_ERROR(CheckResult(r, name));
  return r;
}

Status Connection::Exec(const std::string& sql) {
  KVC_RETURN_IF_ERROR(Ensure());
  PgResult r(PQexec(conn_, sql.c_str()));
  return CheckResult(r, "exec");
}

Result<PgResult> Connection::Query(const std::string& sql, const Params& params) {
  KVC_RETURN_IF_ERROR(Ensure());
  PgResult r(PQexecParams(conn_, sql.c_str(), params.size(), nullptr, params.values(),
                          params.lengths(), params.formats(), 1));
  KVC_RETURN_IF_ERROR(CheckResult(r, "query"));
  return r;
}

Result<std::vector<PgResult>> Connection::Pipeline(const std::vector<Statement>& stmts) {
  KVC_RETURN_IF_ERROR(Ensure());
  for (const Statement& s : stmts) KVC_RETURN_IF_ERROR(PrepareIfNeeded(s.name));
  if (!PQenterPipelineMode(conn_)) return Error("pipeline");
  Status sent = Status::Ok();
  size_t n = 0;
  for (const Statement& s : stmts) {
    if (!PQsendQueryPrepared(conn_, s.name.c_str(), s.params.size(), s.params.values(),
                             s.params.lengths(), s.params.formats(), 1)) {
      sent = Error(s.name);
      break;
    }
    if (++n % 64 == 0) {  // write as we go, reading results meanwhile
      sent = Flush(s.name);
      if (!sent.ok()) break;
    }
  }
  if (sent.ok() && !PQpipelineSync(conn_)) sent = Error("pipeline sync");
  if (sent.ok()) sent = Flush("pipeline");
  if (!sent.ok()) {
    Close();  // the session's state is unknown: start over
    return sent;
  }
  std::vector<PgResult> out;
  out.reserve(stmts.size());
  Status first = Status::Ok();
  bool ended = false;  // the last call returned the end of a statement's results
  for (;;) {
    PGresult* raw = PQgetResult(conn_);
    if (!raw) {
      // One end per statement, each after its results. Two in a row: libpq has nothing more
      // to give and the sync will never come (the server went while the pipeline was sent:
      // libpq keeps CONNECTION_OK and answers every further call at once, without reading).
      if (PQstatus(conn_) == CONNECTION_OK && !ended) {
        ended = true;
        continue;
      }
      if (PQstatus(conn_) == CONNECTION_OK) (void)PQconsumeInput(conn_);  // for the reason
      Status s = Error("pipeline");
      Close();
      return s;
    }
    ended = false;
    PgResult r(raw);
    if (PQresultStatus(raw) == PGRES_PIPELINE_SYNC) break;
    if (first.ok()) {
      const size_t i = out.size();
      first = CheckResult(r, i < stmts.size() ? stmts[i].name : "pipeline");
    }
    out.push_back(std::move(r));
  }
  if (!PQexitPipelineMode(conn_)) {
    Status s = Error("pipeline exit");
    Close();
    return s;
  }
  if (!first.ok()) return first;
  return out;
}

bool Connection::InTransaction() const {
  if (!conn_) return false;
  const PGTransactionStatusType t = PQtransactionStatus(conn_);
  return t == PQTRANS_INTRANS || t == PQTRANS_INERROR;
}

void Connection::RollbackQuietly() {
  if (!connected() || !InTransaction()) return;
  PgResult r(PQexec(conn_, "rollback"));
}

std::string UuidHex(const std::string& uuid) {
  std::string out;
  for (char c : uuid) {
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')) out.push_back(c);
    if (c >= 'A' && c <= 'F') out.push_back(static_cast<char>(c - 'A' + 'a'));
  }
  return out;
}

}  // namespace kvc::storage::pg
