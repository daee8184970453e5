#define _GNU_SOURCE
#include "core/dynlib.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

void dt_dynlib_folder_of(const void *symbol, char *dir, size_t size)
{
    Dl_info info;
    if (size == 0) return;
    dir[0] = '\0';
    if (!symbol || !dladdr(symbol, &info) || !info.dli_fname) return;
    snprintf(dir, size, "%s", info.dli_fname);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = '\0';
    else dir[0] = '\0';
}

int dt_dynlib_probe(const char *const *names, int n, const char *dir, char *missing, size_t size)
{
    int count = 0;
    size_t used = 0;
    if (size) missing[0] = '\0';
    for (int i = 0; i < n; i++) {
        void *h = dlopen(names[i], RTLD_LAZY | RTLD_LOCAL);
        char reason[300] = "";
        if (!h) {
            const char *e = dlerror();
            snprintf(reason, sizeof reason, "%s", e ? e : "cannot be loaded");
            if (dir && dir[0]) {
                char path[4200];
                snprintf(path, sizeof path, "%s/%s", dir, names[i]);
                h = dlopen(path, RTLD_LAZY | RTLD_LOCAL);
            }
        }
        if (h) {
            dlclose(h);
            continue;
        }
        count++;
        if (used < size) {
            int w = snprintf(missing + used, size - used, "%s%s (%s)", count > 1 ? "; " : "",
                             names[i], reason);
            used += w > 0 ? (size_t)w : 0;
        }
    }
    return count;
}
