// The PostgreSQL schema kvconnect keeps (one schema for every database of a deployment; each
// data row carries its database's UUID), created and migrated by kvconnect itself:
//   kvc_schema_version   the applied migration count (one row)
//   kvc_catalog_meta     the catalog's change counter ('generation')
//   kvc_databases, kvc_access_tokens   the catalog (token hashes only), as in the SQLite catalog
//   kvc_secrets          named secrets (the data-path token key), shared by every node
//   kvc_data_version     per database: the committed version (the counter row every write
//                        transaction locks first) and the timeline it was last written on
//   kvc_kv               per database: key, value, encoding, version, expiry
//   kvc_changes          per database: every commit (change_log.h form), read by other nodes'
//                        change feeds and pruned after a retention period
//   kvc_queue, kvc_queue_running, kvc_queue_state, kvc_queue_dead   queue rows (as in SQLite)
//   kvc_nodes            the node registry (advertised URL, role, region, heartbeat)
//
// Migrations run under an advisory lock, so nodes starting at once apply each exactly once.
//
// Thread-safety: a pure function of the connection it is given.
#pragma once

#include "common/status.h"
#include "storage/postgres/pg_conn.h"

namespace kvc::storage::pg {

// Creates or migrates the schema. Errors: IoError; FailedPrecondition-like InvalidArgument when
// the schema was made by a newer kvconnect.
Status MigrateSchema(Connection& conn);

// The advisory-lock class ids kvconnect uses (first argument of the two-key form).
inline constexpr int kLockSchema = 45120;
inline constexpr int kLockExpiry = 45121;

}  // namespace kvc::storage::pg
