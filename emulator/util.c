/* cellab-cell: the monotonic clock, the CPU latency hold and the fatal-error exit (exit 2, before anything is
 * touched). */
#include "cell.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* The PM QoS CPU latency held at 0 while the cell runs (the kernel lifts it when the fd closes, at exit): idle
 * CPUs poll instead of halting. In a VM a halted vCPU wakes only when the hypervisor runs it again; measured on
 * this project's 2-vCPU guest during a download, 30-46 % "steal" and TTIs up to 16-42 ms late without the hold,
 * no steal with it. Returns the fd, or -1 where it cannot be held (not root, no such device). */
int hold_cpus_awake(void)
{
    int fd = open("/dev/cpu_dma_latency", O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int32_t zero_us = 0;
    if (write(fd, &zero_us, sizeof(zero_us)) != (ssize_t)sizeof(zero_us)) {
        close(fd);
        return -1;
    }
    return fd;
}

void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("cellab-cell: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(2);
}
