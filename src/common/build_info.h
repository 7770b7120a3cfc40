// The build's identity, for `kvconnect --version`, the serve banner and the
// kvconnect_build_info metric: the project version (CMake's `project(... VERSION)`) and the git
// commit the binary was built from, stamped at configure time ("unknown" outside a git checkout,
// e.g. a source archive or the Docker build context unless -DKVC_COMMIT is given), and the
// allocator the running process uses. Defined in the generated build_info.cc (from
// build_info.cc.in in the build tree).
//
// Thread-safety: constants; AllocatorInUse may be called from any thread.
#pragma once

namespace kvc {

const char* BuildVersion();  // e.g. "0.1.0"
const char* BuildCommit();   // 12 hex digits, or "unknown"
// "jemalloc" when the process's malloc is jemalloc's (linked in, see KVC_JEMALLOC in
// CMakeLists.txt, or preloaded), else "libc".
const char* AllocatorInUse();
// jemalloc's transparent huge page mode ("always", "never" or "default": see the malloc_conf of
// src/main.cc), or "" with the C library's malloc.
const char* AllocatorHugePages();

}  // namespace kvc
