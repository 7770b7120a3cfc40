// BackupDestinations: where on-demand snapshots through the admin API may go. The operator
// chooses (README "Backups and restore"): the default destination (`--backup-to`, else the
// first `--backup-allow`) and an allow-list (`--backup-allow`, repeatable). A request names a
// destination or none (the default); a token bound to one database may only use the default,
// a server-wide token any allowed one. Nothing else is ever written, so a tenant's admin token
// cannot make the server write where the server's user (or its S3 credentials) can reach.
//
// Destinations are compared after normalisation (NormalizeBackupDestination): `file://` and
// plain paths alike, `.`/`..`, symlinks of the part that exists and repeated or trailing
// slashes resolved; S3 URLs with empty segments and trailing slashes dropped. A relative path,
// and a directory that is the data directory, lies inside it or contains it (a database named
// like the data directory would then write into it), are refused at start-up and per request.
//
// Thread-safety: immutable after Create; Resolve may run on any thread (it reads the file
// system to resolve symlinks).
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace kvc::backup {

// The normal form of a destination: "s3://bucket[/prefix]" or an absolute directory path.
// Errors: InvalidArgument (a relative path, an empty one, another URL scheme, `.` or `..` in
// an S3 URL, a path the file system cannot resolve), with a text for the client.
Result<std::string> NormalizeBackupDestination(const std::string& destination);

class BackupDestinations {
 public:
  BackupDestinations() = default;  // none: every request is refused

  // `default_destination` (may be empty) and `allowed` as the operator gave them; `data_dir`
  // the server's data directory (empty: none to protect, e.g. with PostgreSQL storage).
  // Errors: InvalidArgument naming the flag and the destination (see the class comment).
  static Result<BackupDestinations> Create(const std::string& default_destination,
                                           const std::vector<std::string>& allowed,
                                           const std::string& data_dir);

  // The destination a request may write to, normalised, for backup::OpenTarget. `requested`
  // empty: the default. `server_wide`: the token is not bound to a database.
  // Errors, in this order: InvalidArgument (malformed or relative), PermissionDenied (none
  // configured; not the default for a token bound to a database, with one text that never
  // says which destinations exist), InvalidArgument (the data directory), PermissionDenied
  // (not allowed).
  Result<std::string> Resolve(const std::string& requested, bool server_wide) const;

  bool empty() const { return allowed_.empty(); }
  // Normalised; empty if none.
  const std::string& default_destination() const { return default_; }

 private:
  // InvalidArgument if `normal` (a normalised local path) is, is inside or contains the data
  // directory.
  Status CheckOutsideDataDir(const std::string& normal, const std::string& given) const;

  std::string data_dir_;              // canonical; empty: none
  std::string default_;               // normalised; empty: none
  std::vector<std::string> allowed_;  // normalised, the default included
};

}  // namespace kvc::backup
