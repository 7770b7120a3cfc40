// A SQLite VFS that gathers the writes of one commit to the write-ahead log into one write.
//
// SQLite writes each WAL frame as two pwrite() calls (the 24-byte frame header, then the page),
// so a group commit of 30 durable sets costs about 60 system calls before its fsync; on a
// virtual machine each one is expensive (issue 24's profile: the writer spent more of its time
// in these pwrites than in the fsync). Through this VFS the writer connection's WAL writes are
// appended to a buffer while they are contiguous. The buffer goes to the file in one write
// (one per 124 KiB, the most SQLite's unix VFS takes in one call) when SQLite syncs the WAL
// (the end of every commit in synchronous=FULL), reads it, asks its size, truncates or closes
// it, when a write is not contiguous, or when the buffer is full.
//
// Why this keeps every promise:
// * Durability: every byte reaches the file before the xSync that makes it durable returns, so
//   a commit that returned (and was acknowledged) is fsynced exactly as without the buffer.
// * Visibility: in synchronous=FULL SQLite syncs a commit's frames before it publishes them in
//   the WAL index, so no other connection can look for a frame that is still in the buffer.
//   Frames of an unfinished transaction (a cache spill) are read back only by the writer's own
//   connection, through this file, which writes the buffer out first. Hence the REQUIRES below:
//   use it only for a connection in synchronous=FULL (sqlite_backend.cc does, for the writer).
// * Crashes: a process killed with frames in the buffer loses only frames that were never
//   synced, which SQLite's WAL recovery already treats as absent (their checksums chain ends).
// * Only WAL files are buffered; the database file, journals and the shared-memory index pass
//   straight through to the wrapped VFS.
//
// Thread-safety: the registry is thread-safe. A buffered file is used by one connection, and a
// connection by one thread at a time (SQLITE_OPEN_NOMUTEX), as SQLite requires of any file.
// Ownership: registered VFSes live until the process exits (SQLite keeps pointers to them).
#pragma once

#include <cstddef>
#include <string>

#include "common/status.h"

namespace kvc::storage::sqlite {

// The name of a VFS that wraps the VFS named `base` (empty: SQLite's default) and buffers WAL
// writes of up to `buffer_bytes` (more in one write go straight through), registering it with
// SQLite on first use. Returns InvalidArgument if no VFS is named `base`, or buffer_bytes is 0.
// REQUIRES: connections opened with it run in synchronous=FULL (see above).
Result<std::string> WalWriteBufferVfs(const std::string& base, size_t buffer_bytes);

}  // namespace kvc::storage::sqlite
