# ReFrame configuration for spank-lama's docker test cluster (docker/cluster.sh), which CI
# runs the checks against (tests/reframe.sh). It is also the example a site copies: change
# the lines marked SITE and nothing else (reframe/README.md).
site_configuration = {
    'systems': [
        {
            # SITE: your cluster's name and the host names of the login (submit) nodes that
            # run ReFrame, as regular expressions.
            'name': 'lama-docker',
            'descr': "spank-lama's docker Slurm cluster",
            'hostnames': ['^slurmctld$'],
            'modules_system': 'nomod',
            'partitions': [
                {
                    # Every check but the GPU one runs where a partition has the feature
                    # 'lama'. SITE: your partition (access), and
                    # 'scheduler': 'slurm' where Slurm keeps accounting (sacct); this cluster
                    # has none, so ReFrame follows its jobs with squeue.
                    'name': 'cpu',
                    'descr': 'CPU nodes',
                    'scheduler': 'squeue',
                    'launcher': 'srun',
                    'access': ['--partition=debug'],
                    'environs': ['builtin', 'openmpi', 'mpich'],
                    'features': ['lama'],
                    'max_jobs': 3,
                },
                {
                    # The GPU check runs where the partition has the feature 'gpu', on
                    # gpus_per_node GPUs a node (add 'lama' to run every other check there
                    # too; here node1 is in the partition above). SITE: your GPU partition; here node1, whose four GPUs are device files without a
                    # driver (opening one fails with ENXIO, as lama verify expects of a GPU
                    # it may open).
                    'name': 'gpu',
                    'descr': 'GPU nodes',
                    'scheduler': 'squeue',
                    'launcher': 'srun',
                    'access': ['--partition=debug', '--nodelist=node1'],
                    'environs': ['builtin'],
                    'features': ['gpu'],
                    'extras': {'gpus_per_node': 4},
                    'max_jobs': 1,
                },
            ],
        },
    ],
    'environments': [
        # The checks without MPI run in ReFrame's own 'builtin' environment: they need the
        # plugin and `lama` on the PATH, nothing else.
        # SITE: an MPI program of each MPI library (any that runs and ends: the checks read its
        # ranks' placement, not its output), the srun --mpi= type that starts it, and the
        # library's launcher ({n}: the number of ranks). Load the library's module with
        # 'modules': [...] where the site uses modules.
        {
            'name': 'openmpi',
            'features': ['mpi'],
            'extras': {
                'mpi_program': '/opt/lama-tests/mpitest-ompi report',
                'srun_mpi': 'pmix',
                'mpi_launcher': 'mpirun -np {n}',
            },
        },
        {
            'name': 'mpich',
            'features': ['mpi'],
            'extras': {
                'mpi_program': '/opt/lama-tests/mpitest-mpich report',
                'srun_mpi': 'pmi2',
                'mpi_launcher': 'mpiexec.mpich -n {n}',
            },
        },
    ],
}
