//! Which of the job's cores on a node a step gets, as slurmctld's step manager picks them
//! (`_pick_step_cores` and `_handle_core_select` in `src/stepmgr/stepmgr.c`, 24.11 and 26.05
//! alike): a step without `--exact` has every core the job has there (`--whole`); an exact
//! one (`--exact`, implied by `-c` and by srun's `--exclusive`) has the cores its tasks' CPUs
//! need, taken across the sockets by `-m`'s second part.

use super::geometry::Geometry;
use super::SocketDist;

/// What the step asks of this node's cores.
#[derive(Debug, Clone, Copy)]
pub struct CoreAsk {
    /// Tasks on this node.
    pub tasks: u32,
    /// Whether the step is exact (`--exact`, or `-c`, or srun's `--exclusive`).
    pub exact: bool,
    /// CPUs per task (`-c`, else 1).
    pub cpus_per_task: u32,
    /// CPUs a core counts for the step: 1 with one thread per core (`--hint=nomultithread`,
    /// `--threads-per-core=1`, or a node whose `CPUs=` counts cores), else the threads asked
    /// for or the core's own.
    pub cpus_per_core: u32,
    /// How the cores are taken across sockets.
    pub dist: SocketDist,
    /// `--overcommit`.
    pub overcommit: bool,
}

/// The step's cores (indexes in abstract order, `socket * cores + core`) among the job's
/// (`job[i]`), or Slurm's refusal.
pub fn step_cores(g: Geometry, job: &[bool], ask: CoreAsk) -> Result<Vec<bool>, String> {
    let job_cores = job.iter().filter(|c| **c).count() as u32;
    if !ask.exact {
        return Ok(job.to_vec());
    }
    let cpt = ask.cpus_per_task;
    if ask.tasks == g.all_cores() {
        // As many tasks as the node has cores: the step takes all the job's.
        return Ok(job.to_vec());
    }
    let need = (ask.tasks * cpt).div_ceil(ask.cpus_per_core);
    if need > job_cores {
        if ask.overcommit {
            return Ok(job.to_vec());
        }
        return Err(format!(
            "{} task(s) of -c {cpt} need {need} core(s) on this node and the job has {job_cores} \
             (Slurm holds the step: \"Requested nodes are busy\"; --overcommit shares them)",
            ask.tasks
        ));
    }
    let per_task = need.div_ceil(ask.tasks);
    let mut pick = Picker {
        g,
        job,
        taken: vec![false; job.len()],
        left: need,
    };
    match ask.dist {
        SocketDist::Block => {
            'b: for s in 0..g.sockets {
                for c in 0..g.cores {
                    if pick.take(s, c) && pick.left == 0 {
                        break 'b;
                    }
                }
            }
        }
        SocketDist::Fcyclic => {
            'f: for c in 0..g.cores {
                for s in 0..g.sockets {
                    if pick.take(s, c) && pick.left == 0 {
                        break 'f;
                    }
                }
            }
        }
        SocketDist::Cyclic => pick.cyclic(per_task),
    }
    Ok(pick.taken)
}

/// The cores taken so far, and how many are still wanted.
struct Picker<'a> {
    g: Geometry,
    job: &'a [bool],
    taken: Vec<bool>,
    left: u32,
}

impl Picker<'_> {
    /// Takes core `c` of socket `s` if the job has it and the step has not taken it.
    fn take(&mut self, s: u32, c: u32) -> bool {
        let i = (s * self.g.cores + c) as usize;
        if !self.job[i] || self.taken[i] {
            return false;
        }
        self.taken[i] = true;
        self.left -= 1;
        true
    }

    /// Each socket in turn gives up to a task's cores (`per_task`), from where it stopped.
    fn cyclic(&mut self, per_task: u32) {
        let g = self.g;
        let mut next = vec![0u32; g.sockets as usize];
        let mut in_task = 0;
        let mut any = true;
        while any {
            any = false;
            for s in 0..g.sockets {
                while next[s as usize] < g.cores {
                    let c = next[s as usize];
                    next[s as usize] += 1;
                    if !self.take(s, c) {
                        continue;
                    }
                    any = true;
                    if self.left == 0 {
                        return;
                    }
                    in_task += 1;
                    if in_task == per_task {
                        in_task = 0;
                        break;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const G: Geometry = Geometry {
        sockets: 2,
        cores: 4,
        threads: 2,
    };

    fn ask(tasks: u32, cpt: u32, dist: SocketDist) -> CoreAsk {
        CoreAsk {
            tasks,
            exact: true,
            cpus_per_task: cpt,
            cpus_per_core: 2,
            dist,
            overcommit: false,
        }
    }

    fn list(v: &[bool]) -> Vec<usize> {
        v.iter()
            .enumerate()
            .filter(|(_, b)| **b)
            .map(|(i, _)| i)
            .collect()
    }

    #[test]
    fn without_c_the_step_has_the_jobs_cores() {
        let job = vec![true; 8];
        let a = CoreAsk {
            exact: false,
            ..ask(2, 1, SocketDist::Cyclic)
        };
        assert_eq!(
            list(&step_cores(G, &job, a).unwrap()),
            (0..8).collect::<Vec<_>>()
        );
    }

    #[test]
    fn with_c_the_cores_go_round_the_sockets_a_task_at_a_time() {
        let job = vec![true; 8];
        // 3 tasks x 4 CPUs on 2-thread cores: 6 cores, 2 a task: s0 c0-1, s1 c4-5, s0 c2-3.
        let s = step_cores(G, &job, ask(3, 4, SocketDist::Cyclic)).unwrap();
        assert_eq!(list(&s), vec![0, 1, 2, 3, 4, 5]);
        // 2 tasks x 2 CPUs: 2 cores, one a task: core 0 and core 4.
        let s = step_cores(G, &job, ask(2, 2, SocketDist::Cyclic)).unwrap();
        assert_eq!(list(&s), vec![0, 4]);
        let s = step_cores(G, &job, ask(2, 2, SocketDist::Block)).unwrap();
        assert_eq!(list(&s), vec![0, 1]);
        let s = step_cores(G, &job, ask(3, 2, SocketDist::Fcyclic)).unwrap();
        assert_eq!(list(&s), vec![0, 1, 4]);
    }

    #[test]
    fn too_many_cpus_are_refused_unless_overcommitted() {
        let job = vec![true; 8];
        let e = step_cores(G, &job, ask(5, 4, SocketDist::Cyclic)).unwrap_err();
        assert!(e.contains("need 10 core(s)"), "{e}");
        let a = CoreAsk {
            overcommit: true,
            ..ask(5, 4, SocketDist::Cyclic)
        };
        assert_eq!(list(&step_cores(G, &job, a).unwrap()).len(), 8);
    }
}
