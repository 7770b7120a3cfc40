// `kvconnect migrate --from URL --to DEST [--db NAME] [--resume]`: imports one database from any
// KV Connect server (Deno Deploy, another kvconnect, denokv) by reading it as a client does
// (cli/kv_source.h) into a storage, a running kvconnect or a dump (cli/import_sink.h).
//
// The copy pages snapshot_read over the whole key space in key order (--page entries, one
// destination write per page, so memory stays bounded by a page). Each page is its own
// snapshot: KV Connect has no snapshot across calls, so writes to the source during the copy
// can leave the copy a mix. The end of a run therefore re-reads the source (unless --no-verify)
// and digests it, digests the destination by reading it back, and compares: equal digests mean
// the destination holds what the source holds now. When they differ, entries of the re-read
// whose versionstamps are newer than any the copy saw are counted, and the user is told that the
// source changed during the copy and to stop writes and import again.
//
// Not over KV Connect: queue messages (nothing lists them) and expiry (entries arrive without
// it): said in the output.
//
// A non-empty destination database is refused unless --resume, which continues after the
// largest key the destination holds (everything up to it was written in whole transactions or
// lines, in key order), even after a `kill -9` of the importer.
//
// Thread-safety: called from one thread.
#pragma once

#include <iosfwd>

#include "cli/import_sink.h"
#include "cli/migrate.h"
#include "common/status.h"

namespace kvc::cli {

struct UrlImportReport {
  int64_t copied = 0;        // entries written by this run
  int64_t copied_bytes = 0;  // their key and value bytes
  double copy_seconds = 0;
  bool resumed = false;
  bool verified = false;          // the digests were computed
  EntryDigest source;             // the re-read source
  EntryDigest destination;        // read back from the destination
  bool destination_read = false;  // false for stdout
  int64_t newer = 0;              // re-read entries newer than any the copy saw
  bool match = false;
};

// Runs the import described by `c` (c.from is an http(s) URL), writing progress and the summary
// to `log`. Errors: InvalidArgument (flags, URL, not KV Connect), NotFound, AlreadyExists (a
// non-empty destination without --resume), Unauthenticated/PermissionDenied (a refused token),
// Unavailable, Internal (an answer that is not KV Connect), the destination's errors. A copy
// whose digests differ is a report with match false, not an error.
Result<UrlImportReport> ImportFromUrl(const MigrateConfig& c, std::ostream& log);

// Runs the command; returns the exit code (0: the digests match, or --no-verify; 1: they differ
// or a failure; 2, 3, 4 as the other commands).
int RunMigrateFromUrl(const MigrateConfig& c);

}  // namespace kvc::cli
