// Private files: everything the server writes (database files and their -wal/-shm, the catalog,
// secrets, the writer lock, scratch copies, backups, exports) is for its own user only, files
// mode 0600 and directories 0700, set explicitly rather than left to the umask or to the mode of
// the directory they are in. SQLite gives a database's -wal and -shm the main file's mode, so a
// main file made 0600 before SQLite opens it keeps all three private.
//
// A file found with permission bits for group or others (made by an older version, or by hand)
// is tightened (its group and other bits removed) and a warning names it, once per path per
// process. A failed chmod (a file someone else owns) is logged, not fatal: the file was usable
// before and stays so.
//
// Thread-safety: every function is thread-safe (the once-only warning is behind a mutex).
#pragma once

#include <sys/types.h>

#include <string>

#include "common/status.h"

namespace kvc::storage {

inline constexpr mode_t kPrivateFileMode = 0600;
inline constexpr mode_t kPrivateDirMode = 0700;

// Makes sure `path` is a file of this user's only: if it is missing and `create` is true, creates
// it empty with mode 0600; if it exists, removes group and other bits (see above). A missing file
// with `create` false is left missing (the caller's open reports it). Returns IoError if the file
// cannot be created or inspected.
Status PreparePrivateFile(const std::string& path, bool create);

// PreparePrivateFile(path, false) for each of `path` + "-wal", "-shm", "-journal" and `path`
// itself: what a SQLite database consists of.
Status PrepareSqliteFiles(const std::string& path, bool create);

// Creates directory `dir` and its missing parents, each with mode 0700 (chmod after mkdir, so
// the umask plays no part). Existing directories keep their mode: a data directory the operator
// made is theirs to set. Returns IoError on failure, or if `dir` exists but is not a directory.
Status MakePrivateDirectories(const std::string& dir);

// For a directory in a place other users can write to (e.g. /tmp/kvconnect-<uid>): creates it
// with mode 0700; if it exists, it must be a directory (not a symbolic link) owned by this
// process's user, and it is set to 0700. Returns IoError, naming the owner, if another user owns
// it (they could read or replace what we put there) or it is a link, and on any other failure.
// REQUIRES: the parent directory exists.
Status MakeOwnedPrivateDirectory(const std::string& dir);

}  // namespace kvc::storage
