// One clone of a hot CPU loop per x86-64 level (AVX-512, AVX2, baseline), picked at load time
// (GCC target_clones), so one binary runs anywhere at the speed of the machine it lands on;
// elsewhere the plain build.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define SUITE_CPU_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define SUITE_CPU_CLONES
#endif
