// Names for the server's threads, so that `top -H`, `ps -L`, `perf report --sort comm`, gdb and
// /proc/<pid>/task/<tid>/comm tell an I/O thread from a database's writer or a checkpoint. The
// benchmarks read them to split the server's CPU by role (tests/bench/ceiling.mjs).
//
// The names in use (one per role, shared by all threads of it):
//   kvc-io          HTTP I/O (net::Server)          kvc-writer      a database's writer
//   kvc-reader      a database's reader             kvc-checkpoint  a database's WAL checkpoints
//   kvc-directory   the catalog poll                kvc-stats       process metrics sampler
//   kvc-backup      continuous backup               kvc-nodes       PostgreSQL node registry
//   kvc-push        queue push delivery             kvc-pool        blocking work pool
//   kvc-pg-feed     PostgreSQL change feed          kvc-backup-job  an admin API backup run
//
// Thread-safety: names the calling thread only; thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace kvc {

// Names the calling thread. Linux keeps at most 15 bytes; a longer name is cut there. Failures
// (no such facility) are ignored: a name is a diagnostic aid only.
void NameThisThread(std::string_view name);

// The calling thread's name as the kernel holds it ("" if it cannot be read).
std::string ThisThreadName();

}  // namespace kvc
