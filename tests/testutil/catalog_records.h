// Records the catalog tests share: fixed database ids and an access token for some databases
// (or all), shaped as the catalogs store them.
//
// Thread-safety: constants and a pure function.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "storage/catalog.h"

namespace kvc::testutil {

inline constexpr const char* kDbA = "0a6f3a8e-1111-4222-8333-444455556666";
inline constexpr const char* kDbB = "0b6f3a8e-1111-4222-8333-444455556666";
inline constexpr const char* kDbC = "0c6f3a8e-1111-4222-8333-444455556666";

// A read-write token with id and name `id`, of the databases `dbs` (or of all with `all`).
inline storage::AccessTokenRecord TokenFor(const std::string& id, std::vector<std::string> dbs,
                                           bool all = false) {
  storage::AccessTokenRecord t;
  t.id = id;
  t.name = id;
  t.database_ids = std::move(dbs);
  t.all_databases = all;
  t.scope = 2;
  t.hash = std::string(64, 'e');
  t.created_ms = 1;
  return t;
}

}  // namespace kvc::testutil
