// Storage specs: the one text that names a storage, as every command takes it (`serve
// --storage`, `db`, `token`, `export`, `import`, `backup`, `restore`, `migrate --from/--to`):
//
//   sqlite:DIR                         a data directory (storage/sqlite)
//   postgres:CONNINFO                  a libpq conninfo, keyword=value (storage/postgres)
//   postgres://...  postgresql://...   a libpq URI, taken whole as the conninfo
//
// A spec is taken apart in one place only: the table of storage kinds in storage.cc, one row
// per kind ({name, prefixes, parse, open, validate}). A new kind of storage is a row there; every
// command then accepts its spec.
//
// Thread-safety: pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"
#include "storage/storage.h"

namespace kvc::storage {

// Parses `spec` into `base` (which keeps every field the spec does not set: sync mode, a
// standby, timings) with `kind` and `location` set, then checks the result
// (ValidateStorageOptions). Nothing is opened or connected to. Errors: InvalidArgument naming
// the accepted forms (an unknown kind), or what is wrong with the location; a message never
// holds a password.
Result<StorageOptions> ParseStorageSpec(std::string_view spec, StorageOptions base = {});

// Checks options as a whole before anything is opened: the kind is known, its location is
// usable (not empty, no NUL byte; a conninfo libpq can parse), and no option of another kind is
// set (a standby or a default database file where the kind has none). OpenStorage calls it
// first. Errors: InvalidArgument, never holding a password.
Status ValidateStorageOptions(const StorageOptions& options);

// The accepted forms, for help and error texts: "sqlite:DIR, postgres:CONNINFO, postgres://...".
std::string StorageSpecForms();

}  // namespace kvc::storage
