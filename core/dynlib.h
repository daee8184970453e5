/* Which shared libraries a library will load at run time can be loaded here: for clear
 * messages when one (cuDNN's engine libraries, cuBLASLt) is missing, instead of a bare
 * "could not start". */
#ifndef DT_DYNLIB_H
#define DT_DYNLIB_H

#include <stddef.h>

/* The folder of the shared object that holds `symbol` (a function's address), into dir;
 * "" when unknown. */
void dt_dynlib_folder_of(const void *symbol, char *dir, size_t size);

/* Try to load each of names[0..n) (dlopen RTLD_LAZY, by name, then from `dir` when not
 * NULL or ""); every one that loads is closed again. The ones that load neither way are
 * listed in `missing` ("libx.so.1 (dlerror's reason); ..."). Returns how many. */
int dt_dynlib_probe(const char *const *names, int n, const char *dir, char *missing, size_t size);

#endif
