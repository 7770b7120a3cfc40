// ChangeLogWriter: the write side of a database's change log (change_log.h), as a part of a
// write transaction that a backend may offer (BackendCapabilities::change_log;
// Writer::change_log()). The engine appends each commit's record in that commit's own
// transaction, so the log can neither miss nor invent one. Reading it back is
// Reader::ReadChangeLog.
//
// Errors: IoError or Corruption, as the owning Writer's.
// Ownership and thread-safety: owned by its Writer (valid while the Writer is) and used by the
// Writer's thread only.
#pragma once

#include <cstdint>

#include "common/status.h"
#include "storage/change_log.h"

namespace kvc::storage {

class ChangeLogWriter {
 public:
  virtual ~ChangeLogWriter() = default;
  // Adds an entry to the change log, in the open transaction.
  virtual Status AppendChangeLog(const ChangeLogRow& row) = 0;
  // Removes the entries with version <= through_version, in the open transaction. A backend
  // may keep them longer (PostgreSQL prunes by age: other nodes' feeds read them too).
  virtual Status PruneChangeLog(int64_t through_version) = 0;
};

}  // namespace kvc::storage
