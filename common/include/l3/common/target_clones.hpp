#pragma once
// When a hot loop may be built twice, for the baseline and for a newer x86-64
// level, with the copy chosen at load time (GCC's target_clones, an ifunc).
// Not under sanitizers: the ifunc resolver runs during relocation, before the
// ASan/TSan runtimes start, and their instrumentation in it crashes the
// process at load. Not with Clang (14), which refuses target_clones on
// function templates.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__) && \
    !defined(__SANITIZE_THREAD__)
#define L3_HAVE_TARGET_CLONES 1
#else
#define L3_HAVE_TARGET_CLONES 0
#endif
