# spank-lama's acceptance checks: what a site runs on its own partitions after installing the
# plugin, to see that every documented case places as documented (reframe/README.md).
#
# Every check runs one batch job on one whole node (--exclusive). The step's tasks each print
# the CPUs the kernel gives them (Cpus_allowed_list, read by the shell) and run `lama verify`,
# which compares every thread, the memory policy, the GPUs the task may open and its variables
# with the placement. The job also asks `lama map` for the same srun line on the node's own
# topology (the one the plugin's steps read: its cache in SlurmdSpoolDir) and CPUs; a check
# passes when every rank's kernel CPUs equal the preview's and every task agrees.
import json
import os
import re
import statistics

import reframe as rfm
import reframe.utility.osext as osext
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.backends import getlauncher
from reframe.core.builtins import (parameter, performance_function, run_after,
                                   run_before, sanity_function, variable)
from reframe.core.exceptions import SanityError

# The topology the plugin's steps read on this node: its cache in SlurmdSpoolDir, unless the
# check is given another (-S topology=FILE).
NODE_TOPOLOGY = ("$(scontrol show config | "
                 "awk '$1 == \"SlurmdSpoolDir\" { print $3 }')/lama_topology.xml")
# The batch step's CPUs on the node: with --exclusive, the node's CPUs that Slurm gives jobs.
JOB_CPUS = "$(awk '$1 == \"Cpus_allowed_list:\" { print $2 }' /proc/self/status)"


def kernel_form(cpus):
    '''A CPU list as the kernel prints it: [0, 1, 2, 5] -> "0-2,5".'''
    runs = []
    for c in sorted(cpus):
        if runs and c == runs[-1][1] + 1:
            runs[-1][1] = c
        else:
            runs.append([c, c])
    return ','.join(str(a) if a == b else f'{a}-{b}' for a, b in runs)


@sn.deferrable
def median(values):
    return statistics.median(values)


def read_tasks(path):
    '''The "task RANK NODE CPUS omp=..." lines (lama-task.sh) by rank, and lama verify's JSON.'''
    tasks, verdicts = {}, []
    with open(path) as f:
        for line in f:
            line = line.strip()
            fields = line.split()
            if len(fields) >= 5 and fields[0] == 'task':
                if not fields[1].isdigit():
                    raise SanityError(f'a task did not know its rank: {line!r}')
                tasks[int(fields[1])] = {'node': fields[2], 'cpus': fields[3],
                                         'omp': fields[4][len('omp='):]}
            elif line.startswith('{'):
                try:
                    verdicts.append(json.loads(line))
                except json.JSONDecodeError:
                    pass
    return tasks, verdicts


class LamaStep(rfm.RunOnlyRegressionTest):
    '''A step the plugin places on one whole node, checked against `lama map` and by
    `lama verify`.'''

    valid_systems = ['+lama']
    valid_prog_environs = ['builtin']
    sourcesdir = 'src'
    executable = './lama-task.sh'
    exclusive_access = True
    num_tasks = 2
    time_limit = '5m'
    tags = {'lama'}
    maintainers = ['spank-lama']
    #: The node's topology for the preview (default: the plugin's cache on the node).
    topology = variable(str, value=NODE_TOPOLOGY)

    #: The step's own options (set by each check).
    step_opts = []

    @run_before('run')
    def set_step(self):
        self.num_tasks_per_node = self.num_tasks
        self.job.launcher.options = list(self.step_opts)
        self.executable_opts = self.expect() + self.program() + ['> tasks.out']
        self.prerun_cmds = self.preview_cmds()
        self.postrun_cmds = ['echo "srun exit: $?"', 'cat tasks.out',
                             f'lama verify --collect --np {self.num_tasks} < tasks.out']

    def program(self):
        '''What each task runs under lama verify (nothing: verify checks itself).'''
        return []

    def expect(self):
        '''lama verify's --expect: the preview of the same srun line.'''
        return ['--expect', 'preview.json']

    def srun_line(self):
        '''The step's srun line, as `lama map --` reads it.'''
        cpt = [f'-c{self.num_cpus_per_task}'] if self.num_cpus_per_task else []
        return ' '.join(['srun', f'-n{self.num_tasks}'] + cpt + list(self.step_opts))

    def preview_cmds(self):
        return [f'lama map --topology "{self.topology}" --restrict "{JOB_CPUS}" '
                f'--node-names "$SLURMD_NODENAME" --json -- {self.srun_line()} ./app '
                '> preview.json']

    def expected(self):
        '''Each rank's CPUs (the kernel's form) and node, from the preview.'''
        with open(os.path.join(self.stagedir, 'preview.json')) as f:
            preview = json.load(f)
        names = [n['name'] for n in preview['nodes']]
        return {p['rank']: (names[p['node']], kernel_form(p['cpus']))
                for p in preview['processes']}

    @sanity_function
    def placed_as_documented(self):
        tasks, verdicts = read_tasks(os.path.join(self.stagedir, 'tasks.out'))
        expected = self.expected()
        if len(expected) != self.num_tasks:
            raise SanityError(f'the preview placed {len(expected)} of {self.num_tasks} tasks')
        for rank in range(self.num_tasks):
            if rank not in tasks:
                raise SanityError(f'rank {rank} printed no task line')
            want = expected[rank]
            got = (tasks[rank]['node'], tasks[rank]['cpus'])
            if got != want:
                raise SanityError(f'rank {rank}: runs on {got[0]} CPUs {got[1]}, '
                                  f'expected {want[0]} CPUs {want[1]}')
        bad = [v for v in verdicts if not v.get('agrees')]
        if bad:
            raise SanityError('lama verify: ' + '; '.join(
                f"rank {v.get('rank')}: {', '.join(v.get('differences', []))}" for v in bad))
        self.more_checks(tasks, verdicts)
        return sn.assert_found(rf'lama verify: {self.num_tasks} tasks? on 1 node: '
                               rf'{self.num_tasks} agree', self.stdout)

    def more_checks(self, tasks, verdicts):
        '''What a check asks beyond the CPUs and lama verify's verdict.'''
        if len(verdicts) != self.num_tasks:
            raise SanityError(f'{len(verdicts)} of {self.num_tasks} tasks ran lama verify')


@rfm.simple_test
class lama_layout(LamaStep):
    '''A layout and a binding (`--lama-map`, `--lama-bind`).'''

    placement = parameter([('scbnh', ''), ('csbnh', '1c'), ('hcsbn', '1h'), ('nbsch', '1s')],
                          fmt=lambda p: p[0] + (f'_{p[1]}' if p[1] else ''))

    @run_after('init')
    def set_options(self):
        layout, bind = self.placement
        self.step_opts = [f'--lama-map={layout}'] + ([f'--lama-bind={bind}'] if bind else [])
        self.descr = f'srun --lama-map={layout}' + (f' --lama-bind={bind}' if bind else '')


@rfm.simple_test
class lama_omp(LamaStep):
    '''`-c` with `--lama-omp`: one task of two CPUs, OpenMP told its places and threads.'''

    num_tasks = 1
    num_cpus_per_task = 2
    step_opts = ['--lama-map=scbnh', '--lama-omp']

    def more_checks(self, tasks, verdicts):
        super().more_checks(tasks, verdicts)
        threads, _, places = tasks[0]['omp'].partition(':')
        if threads != str(self.num_cpus_per_task) or places in ('', 'unset'):
            raise SanityError(f'OMP_NUM_THREADS:OMP_PLACES is {tasks[0]["omp"]}, '
                              f'expected {self.num_cpus_per_task} threads and places')


@rfm.simple_test
class lama_membind(LamaStep):
    '''Memory bound to each task's NUMA node (`--lama-membind=local`).'''

    step_opts = ['--lama-map=scbnh', '--lama-membind=local']

    def more_checks(self, tasks, verdicts):
        super().more_checks(tasks, verdicts)
        for v in verdicts:
            if v.get('membind') != 'local' or not v.get('policy'):
                raise SanityError(f"rank {v.get('rank')}: memory binding not checked: {v}")


@rfm.simple_test
class lama_plan(LamaStep):
    '''A communication-aware plan (`lama plan`, `--lama-plan`) for a ring of the step's tasks,
    one hardware thread each.'''

    step_opts = ['--lama-plan=plan.lama']

    def preview_cmds(self):
        n = self.num_tasks
        ring = '; '.join(f'echo {i} {(i + 1) % n} 10' for i in range(n))
        return [f'({ring}) > ring.mat',
                f'lama plan --matrix ring.mat --np {n} --topology "{self.topology}" '
                f'--node-names "$SLURMD_NODENAME" --bind hwthread --out plan']

    def expect(self):
        # The plan is the expectation (lama verify reads the rank's CPUs it gave).
        return []

    def expected(self):
        # The plan's own lines: "rank R NODE pu P cpus LIST".
        want = {}
        with open(os.path.join(self.stagedir, 'plan.lama')) as f:
            for line in f:
                fields = line.split()
                if len(fields) == 7 and fields[0] == 'rank':
                    want[int(fields[1])] = (fields[2], kernel_form(
                        int(c) for c in fields[6].split(',')))
        return want


@rfm.simple_test
class lama_gpu(LamaStep):
    '''A GPU step: the node's GPUs (the partition's extras: gpus_per_node) dealt to the tasks
    one each by a `g` layout, each task beside its GPU and able to open it (lama verify).'''

    valid_systems = ['+gpu']

    @run_after('setup')
    def ask_gpus(self):
        gpus = self.current_partition.extras.get('gpus_per_node', 1)
        self.skip_if(gpus < self.num_tasks,
                     f'{self.num_tasks} tasks need as many GPUs; the partition has {gpus}')
        self.step_opts = [f'--gres=gpu:{gpus}', '--lama-map=gcsbnh', '--lama-bind=1g']
        self.job.options += [f'--gres=gpu:{gpus}']

    def more_checks(self, tasks, verdicts):
        super().more_checks(tasks, verdicts)
        # Which cards: the plugin names each task's (LAMA_GPU_BUS_IDS), lama verify finds
        # their device files and whether the task may open them (and, for CUDA, that the
        # card it opens first is the task's own: a difference, so no agreement, otherwise).
        for v in verdicts:
            cards = v.get('gpu_buses')
            if not v.get('gpus') or not cards or \
                    not set(cards) <= set(v.get('gpu_cards_open') or []):
                raise SanityError(f"rank {v.get('rank')}: GPUs {v.get('gpus')} on cards "
                                  f"{cards}, may open {v.get('gpu_cards_open')}")


class LamaMpi(LamaStep):
    '''An MPI program of the environment (its extras: mpi_program, srun_mpi, mpi_launcher). Each
    rank is judged as it starts the program; with -S watch_program=true, lama verify also
    watches every thread of the program while it runs (a library that moves a thread of its
    own, even for a moment during MPI_Init, then fails the check).'''

    valid_prog_environs = ['+mpi']
    watch_program = variable(typ.Bool, value=False)

    def program(self):
        watch = ['--watch'] if self.watch_program else []
        return watch + self.current_environ.extras['mpi_program'].split()


@rfm.simple_test
class lama_mpi_direct(LamaMpi):
    '''MPI by direct launch: `srun --mpi=TYPE --lama-map=scbnh PROGRAM`.'''

    @run_after('setup')
    def needs_mpi_type(self):
        kind = self.current_environ.extras['srun_mpi']
        types = osext.run_command('srun --mpi=list').stdout + \
            osext.run_command('srun --mpi=list').stderr
        self.skip_if(not re.search(rf'\b{kind}\b', types),
                     f'this Slurm has no mpi/{kind} plugin (srun --mpi=list)')
        self.step_opts = [f'--mpi={kind}', '--lama-map=scbnh']


@rfm.simple_test
class lama_mpi_exec(LamaMpi):
    '''MPI under the library's own launcher: `mpirun lama exec --map scbnh -- PROGRAM`.'''

    @run_before('run')
    def under_launcher(self):
        launcher = self.current_environ.extras['mpi_launcher'].format(n=self.num_tasks)
        self.job.launcher = getlauncher('local')()
        self.executable = f'{launcher} lama exec --map scbnh -- ./lama-task.sh'

    def expect(self):
        # The plugin takes no part (no srun line to preview for --expect): the ranks are
        # compared with lama map's preview of the layout alone.
        return []

    def preview_cmds(self):
        return [f'lama map --topology "{self.topology}" --restrict "{JOB_CPUS}" '
                f'--node-names "$SLURMD_NODENAME" --np {self.num_tasks} '
                '--map scbnh --json > preview.json']


@rfm.simple_test
class lama_by_hand(LamaStep):
    '''The masks the site expects, written by hand for its node type (-S
    lama_by_hand.expected="0-1 2-3 ..."): one kernel CPU list per rank, for the step
    `srun -n<num_tasks> <opts>`, so that a bug that lama map shares with the plugin cannot
    hide.'''

    expected_cpus = variable(str, type(None), value=None)
    opts = variable(str, value='--lama-map=scbnh')

    @run_after('init')
    def set_options(self):
        self.skip_if(self.expected_cpus is None,
                     'no masks written by hand (-S lama_by_hand.expected_cpus="...")')
        self.step_opts = self.opts.split()

    def expected(self):
        cpus = self.expected_cpus.split()
        node = json.load(open(os.path.join(self.stagedir, 'preview.json')))['nodes'][0]['name']
        return {rank: (node, c) for rank, c in enumerate(cpus)}


@rfm.simple_test
class lama_bad_input(rfm.RunOnlyRegressionTest):
    '''Bad input is refused with a message, and the node stays up: a layout that does not
    parse, a plan that is no plan, then an ordinary step on the same node.'''

    valid_systems = ['+lama']
    valid_prog_environs = ['builtin']
    exclusive_access = True
    num_tasks = 1
    time_limit = '5m'
    tags = {'lama'}
    executable = 'true'

    @run_before('run')
    def bad_steps(self):
        self.prerun_cmds = [
            'srun -n1 --lama-map=scbnx true; echo "bad layout: exit $?"',
            'printf "lama-plan 1\\nranks 1\\nrank 0 nowhere pu 0 cpus 99999\\n" > bad.lama',
            'srun -n1 --lama-plan=bad.lama true; echo "bad plan: exit $?"',
            'echo "node state: $(sinfo -h -N -n "$SLURMD_NODENAME" -o %T | sort -u | tr "\\n" " ")"',
        ]
        self.postrun_cmds = ['echo "next step: exit $?"']

    @sanity_function
    def refused_and_up(self):
        return sn.all([
            sn.assert_found(r'bad layout: exit [1-9]', self.stdout),
            sn.assert_found(r'bad plan: exit [1-9]', self.stdout),
            sn.assert_found(r'lama: .*scbnx', self.stderr),
            sn.assert_found(r'lama: .*bad\.lama', self.stderr),
            sn.assert_not_found(r'node state: .*(drain|down|fail)', self.stdout),
            sn.assert_found(r'node state: \S', self.stdout),
            sn.assert_found(r'next step: exit 0', self.stdout),
        ])


@rfm.simple_test
class lama_step_cost(rfm.RunOnlyRegressionTest):
    '''What the plugin costs a step: the median time of `srun -n<num_tasks> true` with and
    without `--lama-map=scbnh`, steps alternating on one node.'''

    valid_systems = ['+lama']
    valid_prog_environs = ['builtin']
    exclusive_access = True
    num_tasks = 2
    time_limit = '10m'
    tags = {'lama', 'performance'}
    steps = variable(int, value=10)
    #: The most a step may cost more with the plugin (ms): a sanity bound, not a reference.
    max_overhead_ms = variable(float, value=500.0)
    executable = 'true'

    @run_before('run')
    def time_steps(self):
        self.num_tasks_per_node = self.num_tasks
        self.job.launcher = getlauncher('local')()
        n = self.num_tasks
        self.prerun_cmds = [
            f'for i in $(seq {self.steps}); do',
            '  for kind in plain lama; do',
            '    [ $kind = lama ] && opt=--lama-map=scbnh || opt=',
            '    t0=$(date +%s%N)',
            f'    srun -n{n} $opt true || echo "step failed: $kind"',
            '    echo "step $kind $(( ($(date +%s%N) - t0) / 1000 ))"',
            '  done',
            'done',
        ]

    def times_ms(self, kind):
        return sn.extractall(rf'^step {kind} (\d+)$', self.stdout, 1, lambda us: int(us) / 1000)

    @sanity_function
    def every_step_ran(self):
        return sn.all([
            sn.assert_not_found('step failed', self.stdout),
            sn.assert_eq(sn.count(self.times_ms('plain')), self.steps),
            sn.assert_eq(sn.count(self.times_ms('lama')), self.steps),
            sn.assert_le(self.overhead(), self.max_overhead_ms,
                         msg='a step with the plugin costs {0} ms more, over {1}'),
        ])

    def overhead(self):
        return median(self.times_ms('lama')) - median(self.times_ms('plain'))

    @performance_function('ms')
    def step_plain(self):
        return median(self.times_ms('plain'))

    @performance_function('ms')
    def step_lama(self):
        return median(self.times_ms('lama'))

    @performance_function('ms')
    def overhead_ms(self):
        return self.overhead()
