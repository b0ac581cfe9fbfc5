/* A program whose second thread exists before the task's binding arrives, as a runtime that
 * starts its helper threads early: with "before", the main thread widens itself to the task's
 * whole cpuset (the kernel keeps the CPUs the cpuset allows), starts a thread there, and returns
 * to its binding, leaving the thread wide; with "after", the thread is started on the binding.
 * The thread sleeps SECONDS (default 1) so that `lama verify -- latethread` sees it.
 * Usage: latethread before|after [SECONDS] */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void *sleeper(void *arg)
{
    sleep(*(unsigned *)arg);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 2 || (strcmp(argv[1], "before") && strcmp(argv[1], "after"))) {
        fprintf(stderr, "usage: latethread before|after [SECONDS]\n");
        return 2;
    }
    unsigned secs = argc > 2 ? (unsigned)atoi(argv[2]) : 1;
    int before = !strcmp(argv[1], "before");
    cpu_set_t bound, wide;
    if (sched_getaffinity(0, sizeof bound, &bound)) {
        perror("sched_getaffinity");
        return 1;
    }
    if (before) {
        CPU_ZERO(&wide);
        for (int c = 0; c < CPU_SETSIZE; c++)
            CPU_SET(c, &wide);
        if (sched_setaffinity(0, sizeof wide, &wide)) {
            perror("sched_setaffinity (wide)");
            return 1;
        }
    }
    pthread_t t;
    if (pthread_create(&t, NULL, sleeper, &secs)) {
        fprintf(stderr, "pthread_create failed\n");
        return 1;
    }
    if (before && sched_setaffinity(0, sizeof bound, &bound)) {
        perror("sched_setaffinity (bound)");
        return 1;
    }
    pthread_join(t, NULL);
    return 0;
}
