//! The `--lama-*` options of srun, sbatch and salloc: names, argument forms and the usage text
//! `srun --help` shows. Also the source of spank-lama(8) ([`crate::manual`]), so the manual
//! page and the help cannot drift apart.

/// `--lama-map`: the layout.
pub const OPT_MAP: &str = "lama-map";
/// `--lama-bind`: the binding width.
pub const OPT_BIND: &str = "lama-bind";
/// `--lama-mppr`: the MPPR limits.
pub const OPT_MPPR: &str = "lama-mppr";
/// `--lama-order`: the rank order.
pub const OPT_ORDER: &str = "lama-order";
/// `--lama-verbose`: one line per task.
pub const OPT_VERBOSE: &str = "lama-verbose";
/// `--lama-omp`: OpenMP places.
pub const OPT_OMP: &str = "lama-omp";
/// `--lama-membind`: the memory binding.
pub const OPT_MEMBIND: &str = "lama-membind";
/// `--lama-plan`: a plan file.
pub const OPT_PLAN: &str = "lama-plan";
/// `--lama-gpu-isolate`: each task sees only its own GPUs.
pub const OPT_GPU_ISOLATE: &str = "lama-gpu-isolate";

/// The options and their usage text (shown by `srun --help`).
pub const OPTIONS: [(&str, Option<&str>, &str); 9] = [
    (
        OPT_MAP,
        Some("layout"),
        "LAMA mapping layout, leftmost level varies fastest: tokens n b s D N L3 L2 L1 c h \
         (e.g. scbnh), or hwthread core l1cache l2cache l3cache numa socket node, or none; \
         led by g (gcsbnh, or gpu) tasks go round-robin over the step's GPUs, each on CPUs \
         near its GPU",
    ),
    (
        OPT_BIND,
        Some("width"),
        "LAMA binding: <count><level> (1c, 2c, 1L2, 1s, 1N ...), an alias, or none [default \
         1c, widened for -c; with a g layout, each task's share of the CPUs near its GPUs]; \
         with a g layout also 1g (all the CPUs near the task's GPU)",
    ),
    (
        OPT_MPPR,
        Some("limits"),
        "LAMA max processes per resource, e.g. 1:c,4:s; with a g layout k:g is at most k \
         tasks per GPU [default: none]",
    ),
    (
        OPT_ORDER,
        Some("n|s"),
        "LAMA rank order on a node: n natural, s sequential (follow the hardware) [default n]",
    ),
    (
        OPT_PLAN,
        Some("file"),
        "apply a plan written by `lama plan` (read by srun/sbatch/salloc as you); launch with \
         SLURM_HOSTFILE=<plan>.hosts and -m arbitrary; not with --lama-map",
    ),
    (
        OPT_MEMBIND,
        Some("local|preferred|none"),
        "LAMA memory binding: allocate on the NUMA nodes of each task's CPU binding, only \
         (local) or preferably (preferred) [default none]",
    ),
    (
        OPT_VERBOSE,
        None,
        "print each task's LAMA placement and binding",
    ),
    (
        OPT_GPU_ISOLATE,
        None,
        "with a g layout: each task sees only its own GPUs (by default it sees all the \
         step's GPUs, its own first)",
    ),
    (
        OPT_OMP,
        None,
        "set OMP_PLACES (one place per bound core), OMP_PROC_BIND=close and, unless set, \
         OMP_NUM_THREADS (-c if given) to match each task's LAMA binding",
    ),
];

/// The `--lama-*` values given to this command or step, as strings.
pub fn user_options(spank: &slurm_spank::SpankHandle) -> crate::request::UserOptions {
    let value = |name: &str| spank.get_option_value_lossy(name).map(|v| v.into_owned());
    crate::request::UserOptions {
        map: value(OPT_MAP),
        bind: value(OPT_BIND),
        mppr: value(OPT_MPPR),
        order: value(OPT_ORDER),
        membind: value(OPT_MEMBIND),
        plan: value(OPT_PLAN),
        verbose: spank.is_option_set(OPT_VERBOSE),
        omp: spank.is_option_set(OPT_OMP),
        gpu_isolate: spank.is_option_set(OPT_GPU_ISOLATE),
    }
}

/// Registers the `--lama-*` options (in srun, sbatch, salloc and slurmstepd).
pub fn register(spank: &mut slurm_spank::SpankHandle) -> Result<(), slurm_spank::SpankError> {
    for (name, arg, usage) in OPTIONS {
        let mut opt = slurm_spank::SpankOption::new(name).usage(usage);
        if let Some(arg) = arg {
            opt = opt.takes_value(arg);
        }
        spank.register_option(opt)?;
    }
    Ok(())
}
