// One PostgreSQL server per test binary, started on first use (PgServer, pg_server.h; fsync off:
// these tests do not cut power) and stopped at exit, and a fresh database on it per call, so
// tests that run against the PostgreSQL storage stay independent of each other.
//
// REQUIRES: called from the test's main thread (the server's parent-death signal follows the
// thread that started it).
// Thread-safety: FreshPgDatabase and DropPgDatabase may be called from one thread at a time.
#pragma once

#include <string>

#include "common/status.h"

namespace kvc::testutil {

// Creates an empty database on the shared server; returns its libpq conninfo.
Result<std::string> FreshPgDatabase();
// Drops a database FreshPgDatabase made (closing its connections first).
void DropPgDatabase(const std::string& conninfo);

}  // namespace kvc::testutil
