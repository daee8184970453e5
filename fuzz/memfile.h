/* The fuzz targets' in-memory file (memfd): created once per process, rewritten with every
 * input, and opened by the readers through its /proc/self/fd path -- plain files to them,
 * with no disk traffic. Needs _GNU_SOURCE (memfd_create) before the first include. */
#ifndef DT_FUZZ_MEMFILE_H
#define DT_FUZZ_MEMFILE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

/* data[0, size) as the file's whole content; its path (valid for the process's life). */
static inline const char *dt_fuzz_memfile(const uint8_t *data, size_t size)
{
    static int fd = -1;
    static char name[64];
    if (fd < 0) {
        fd = memfd_create("fuzz", 0);
        if (fd < 0) {
            perror("fuzz: memfd_create");
            abort();
        }
        snprintf(name, sizeof name, "/proc/self/fd/%d", fd);
    }
    if (ftruncate(fd, 0) != 0) {
        perror("fuzz: ftruncate");
        abort();
    }
    for (size_t done = 0; done < size;) {
        ssize_t w = pwrite(fd, data + done, size - done, (off_t)done);
        if (w <= 0) {
            perror("fuzz: pwrite");
            abort();
        }
        done += (size_t)w;
    }
    return name;
}

#endif
