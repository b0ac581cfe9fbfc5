/* The MPI test program of the end-to-end tests (tests/e2e/mpi.sh), built once per MPI library
 * in the cluster's node image (docker/Dockerfile): /opt/lama-tests/mpitest-ompi (Open MPI) and
 * /opt/lama-tests/mpitest-mpich (MPICH).
 *
 *   mpitest [report] [halo BYTES ITERS]...      (default: report)
 *
 * report: one line per rank, gathered and printed by rank 0 in rank order:
 *   RANK HOST CPUS LAMA_CPUS SLURM_PROCID SIZE LIBRARY THREADS
 * RANK is MPI_Comm_rank of MPI_COMM_WORLD, CPUS the process's sched_getaffinity (as the kernel
 * writes Cpus_allowed_list: 0-1,4), LAMA_CPUS and SLURM_PROCID the environment's ("unset" when
 * absent), SIZE MPI_Comm_size, LIBRARY "ompi" or "mpich" (the mpi.h it was built with).
 * THREADS is, for each OpenMP thread of one parallel region in thread order, "CPU/MASK" joined
 * by "|": the CPU it ran on (sched_getcpu) and its own affinity. The first four fields are
 * those of the shell task report of tests/lib.sh, so its helpers (actual_cpus, predict) read
 * this report too.
 *
 * halo BYTES ITERS: a halo exchange on a periodic 2-D process grid (MPI_Dims_create,
 * MPI_Cart_create): each rank holds an n x n block of doubles with a halo d deep, and sends
 * each of its four neighbours a message of about BYTES (d rows, or d strided columns, of n
 * doubles: n = min(512, BYTES/8), d = BYTES/(8n)), ITERS times. Every iteration writes values
 * that encode (rank, iteration, row, column) and checks every halo cell received. Rank 0
 * prints "halo ranks=P grid=AxB bytes=M iters=K errors=E usec_per_exchange=T" (M the real
 * message size); the program exits 1 if any cell was wrong.
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <omp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(OPEN_MPI)
#define LIBRARY "ompi"
#elif defined(MPICH)
#define LIBRARY "mpich"
#else
#define LIBRARY "other"
#endif

#define LINE 8192
#define MAXTHREADS 64

/* A CPU set in the kernel's list form (0-1,4). */
static void cpulist(const cpu_set_t *set, char *out, size_t len)
{
    size_t used = 0;
    int c = 0;
    out[0] = '\0';
    while (c < CPU_SETSIZE) {
        if (!CPU_ISSET(c, set)) { c++; continue; }
        int e = c;
        while (e + 1 < CPU_SETSIZE && CPU_ISSET(e + 1, set)) e++;
        int n = e == c ? snprintf(out + used, len - used, "%s%d", used ? "," : "", c)
                       : snprintf(out + used, len - used, "%s%d-%d", used ? "," : "", c, e);
        if (n < 0 || (size_t)n >= len - used) break;
        used += (size_t)n;
        c = e + 1;
    }
}

static const char *env_or_unset(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : "unset";
}

static int report(int rank, int size)
{
    char line[LINE], host[256], cpus[1024], threads[MAXTHREADS * 64 + 1];
    cpu_set_t set;

    gethostname(host, sizeof host);
    host[sizeof host - 1] = '\0';
    char *dot = strchr(host, '.');
    if (dot) *dot = '\0';
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0) { perror("sched_getaffinity"); return 1; }
    cpulist(&set, cpus, sizeof cpus);

    /* Each OpenMP thread: the CPU it runs on and its own mask (OMP_PROC_BIND may narrow it). */
    int nthreads = 1;
    char per[MAXTHREADS][48];
#pragma omp parallel
    {
        int t = omp_get_thread_num();
#pragma omp single
        nthreads = omp_get_num_threads();
        if (t < MAXTHREADS) {
            cpu_set_t mine;
            char m[32];
            /* A short spin so that a thread that the scheduler could move settles somewhere. */
            volatile double x = 0;
            for (int i = 0; i < 200000; i++) x += i;
            if (x < 0) abort();
            CPU_ZERO(&mine);
            sched_getaffinity(0, sizeof mine, &mine);
            cpulist(&mine, m, sizeof m);
            snprintf(per[t], sizeof per[t], "%d/%s", sched_getcpu(), m);
        }
    }
    size_t used = 0;
    threads[0] = '\0';
    for (int t = 0; t < nthreads && t < MAXTHREADS; t++) {
        size_t len = strlen(per[t]);
        if (t) threads[used++] = '|';
        memcpy(threads + used, per[t], len + 1);
        used += len;
    }
    snprintf(line, sizeof line, "%d %s %s %s %s %d %s %s", rank, host, cpus,
             env_or_unset("LAMA_CPUS"), env_or_unset("SLURM_PROCID"), size, LIBRARY, threads);

    /* Rank 0 prints every line in rank order: no interleaving of the ranks' output. */
    char *all = rank == 0 ? malloc((size_t)size * LINE) : NULL;
    if (rank == 0 && !all) { perror("malloc"); return 1; }
    MPI_Gather(line, LINE, MPI_CHAR, all, LINE, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        for (int r = 0; r < size; r++) printf("%s\n", all + (size_t)r * LINE);
        fflush(stdout);
        free(all);
    }
    return 0;
}

/* The value rank R writes at row I, column J of its block in iteration T: exact in a double. */
static double value(int r, int t, int i, int j)
{
    return (((double)r * 1000 + t) * 4096 + i) * 4096 + j;
}

static int halo(int rank, int size, long bytes, int iters)
{
    if (bytes < 8 || bytes > 2L << 20 || iters < 1) {
        if (rank == 0) fprintf(stderr, "mpitest: halo BYTES ITERS: 8 <= BYTES <= 2 MiB, ITERS >= 1\n");
        return 1;
    }
    int n = (int)(bytes / 8 < 512 ? bytes / 8 : 512);
    int d = (int)(bytes / (8L * n));
    int w = n + 2 * d; /* row length of the block with its halo */
    int dims[2] = {0, 0}, periods[2] = {1, 1}, coords[2];
    MPI_Comm grid;
    MPI_Dims_create(size, 2, dims);
    MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &grid);
    MPI_Cart_coords(grid, rank, 2, coords);
    int north, south, west, east;
    MPI_Cart_shift(grid, 0, 1, &north, &south);
    MPI_Cart_shift(grid, 1, 1, &west, &east);

    double *a = calloc((size_t)w * w, sizeof *a);
    if (!a) { perror("calloc"); return 1; }
    MPI_Datatype rows, cols;
    MPI_Type_vector(d, n, w, MPI_DOUBLE, &rows); /* d rows of the n interior columns */
    MPI_Type_commit(&rows);
    MPI_Type_vector(n, d, w, MPI_DOUBLE, &cols); /* d columns of the n interior rows */
    MPI_Type_commit(&cols);
#define AT(i, j) a[(size_t)(i) * w + (j)]

    long errors = 0;
    double elapsed = 0;
    for (int t = 0; t < iters; t++) {
        for (int i = 0; i < w; i++)
            for (int j = 0; j < w; j++)
                AT(i, j) = (i >= d && i < d + n && j >= d && j < d + n) ? value(rank, t, i, j) : -1;
        MPI_Request req[8];
        MPI_Barrier(grid);
        double t0 = MPI_Wtime();
        /* Receive into the halo, send the interior edge: north halo <- north's last rows. */
        MPI_Irecv(&AT(0, d), 1, rows, north, 0, grid, &req[0]);
        MPI_Irecv(&AT(d + n, d), 1, rows, south, 1, grid, &req[1]);
        MPI_Irecv(&AT(d, 0), 1, cols, west, 2, grid, &req[2]);
        MPI_Irecv(&AT(d, d + n), 1, cols, east, 3, grid, &req[3]);
        MPI_Isend(&AT(n, d), 1, rows, south, 0, grid, &req[4]);
        MPI_Isend(&AT(d, d), 1, rows, north, 1, grid, &req[5]);
        MPI_Isend(&AT(d, n), 1, cols, east, 2, grid, &req[6]);
        MPI_Isend(&AT(d, d), 1, cols, west, 3, grid, &req[7]);
        MPI_Waitall(8, req, MPI_STATUSES_IGNORE);
        elapsed += MPI_Wtime() - t0;
        for (int i = 0; i < d; i++)
            for (int j = d; j < d + n; j++) {
                errors += AT(i, j) != value(north, t, n + i, j);
                errors += AT(d + n + i, j) != value(south, t, d + i, j);
            }
        for (int i = d; i < d + n; i++)
            for (int j = 0; j < d; j++) {
                errors += AT(i, j) != value(west, t, i, n + j);
                errors += AT(i, d + n + j) != value(east, t, i, d + j);
            }
    }
    long total = 0;
    double slowest = 0;
    MPI_Reduce(&errors, &total, 1, MPI_LONG, MPI_SUM, 0, grid);
    MPI_Reduce(&elapsed, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, grid);
    MPI_Bcast(&total, 1, MPI_LONG, 0, grid);
    if (rank == 0) {
        printf("halo ranks=%d grid=%dx%d bytes=%ld iters=%d errors=%ld usec_per_exchange=%.1f\n",
               size, dims[0], dims[1], 8L * n * d, iters, total, slowest / iters * 1e6);
        fflush(stdout);
    }
    MPI_Type_free(&rows);
    MPI_Type_free(&cols);
    MPI_Comm_free(&grid);
    free(a);
    return total != 0;
}

int main(int argc, char **argv)
{
    int rank, size, rc = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc == 1) rc = report(rank, size);
    for (int i = 1; i < argc && rc == 0; i++) {
        if (strcmp(argv[i], "report") == 0) {
            rc = report(rank, size);
        } else if (strcmp(argv[i], "halo") == 0 && i + 2 < argc) {
            rc = halo(rank, size, atol(argv[i + 1]), atoi(argv[i + 2]));
            i += 2;
        } else {
            if (rank == 0) fprintf(stderr, "usage: mpitest [report] [halo BYTES ITERS]...\n");
            rc = 2;
        }
    }
    MPI_Finalize();
    return rc;
}
