/* The libFuzzer entry point every fuzz/fuzz_<target>.c defines. libFuzzer calls it with each
 * generated input; fuzz/replay_main.c calls it with each file of a corpus or regression
 * folder, without libFuzzer, so the same checks run in every build (ASan included). It
 * returns 0; a broken promise aborts. */
#ifndef DT_FUZZ_TARGET_H
#define DT_FUZZ_TARGET_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
