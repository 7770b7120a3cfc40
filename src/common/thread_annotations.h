// Clang thread-safety annotations (https://clang.llvm.org/docs/ThreadSafetyAnalysis.html).
//
// With clang and -Wthread-safety the compiler checks, per function, that a member marked
// KVC_GUARDED_BY(mu) is only touched while `mu` is held, that a function marked
// KVC_REQUIRES(mu) is only called with it held, and so on. Under any other compiler the
// macros expand to nothing. The lockable types that carry the annotations are in
// common/mutex.h; use them instead of std::mutex for state shared between threads.
//
// Thread-safety: not applicable (macros only).
#pragma once

#if defined(__clang__)
#define KVC_THREAD_ANNOTATION_(x) __attribute__((x))
#else
#define KVC_THREAD_ANNOTATION_(x)
#endif

// On a class: its instances are a lockable capability named `name` in diagnostics.
#define KVC_CAPABILITY(name) KVC_THREAD_ANNOTATION_(capability(name))
// On a class: an RAII object that holds a capability for its lifetime.
#define KVC_SCOPED_CAPABILITY KVC_THREAD_ANNOTATION_(scoped_lockable)

// On a data member (or global): read and written only with `mu` held.
#define KVC_GUARDED_BY(mu) KVC_THREAD_ANNOTATION_(guarded_by(mu))
// On a pointer member: the object it points to is used only with `mu` held (the pointer itself
// is not guarded).
#define KVC_PT_GUARDED_BY(mu) KVC_THREAD_ANNOTATION_(pt_guarded_by(mu))

// On a mutex member: the lock order. Checked only with -Wthread-safety-beta.
#define KVC_ACQUIRED_BEFORE(...) KVC_THREAD_ANNOTATION_(acquired_before(__VA_ARGS__))
#define KVC_ACQUIRED_AFTER(...) KVC_THREAD_ANNOTATION_(acquired_after(__VA_ARGS__))

// On a function: the caller must hold the capabilities (exclusively, or at least shared).
#define KVC_REQUIRES(...) KVC_THREAD_ANNOTATION_(requires_capability(__VA_ARGS__))
#define KVC_REQUIRES_SHARED(...) KVC_THREAD_ANNOTATION_(requires_shared_capability(__VA_ARGS__))
// On a function: the caller must not hold them (the function takes them itself).
#define KVC_EXCLUDES(...) KVC_THREAD_ANNOTATION_(locks_excluded(__VA_ARGS__))

// On a function: it acquires / releases the capabilities (no argument: `this`).
#define KVC_ACQUIRE(...) KVC_THREAD_ANNOTATION_(acquire_capability(__VA_ARGS__))
#define KVC_ACQUIRE_SHARED(...) KVC_THREAD_ANNOTATION_(acquire_shared_capability(__VA_ARGS__))
#define KVC_RELEASE(...) KVC_THREAD_ANNOTATION_(release_capability(__VA_ARGS__))
#define KVC_RELEASE_SHARED(...) KVC_THREAD_ANNOTATION_(release_shared_capability(__VA_ARGS__))
// On a function: it acquires the capabilities when it returns `result` (true or false).
#define KVC_TRY_ACQUIRE(...) KVC_THREAD_ANNOTATION_(try_acquire_capability(__VA_ARGS__))
// On a function: from its return on, the analysis assumes the capability is held.
#define KVC_ASSERT_CAPABILITY(x) KVC_THREAD_ANNOTATION_(assert_capability(x))
// On a function returning a reference to a mutex: which one it is.
#define KVC_RETURN_CAPABILITY(x) KVC_THREAD_ANNOTATION_(lock_returned(x))

// On a function: not analysed. Use only where the locking cannot be expressed, with a comment
// that says why.
#define KVC_NO_THREAD_SAFETY_ANALYSIS KVC_THREAD_ANNOTATION_(no_thread_safety_analysis)
