//! task/affinity's layout of a node's tasks over the step's CPUs (`_task_layout_lllp_cyclic`,
//! `_task_layout_lllp_block` and `_expand_masks` in `src/plugins/task/affinity/dist_tasks.c`,
//! 24.11 and 26.05 alike), in abstract PU order. Kept step for step, counters included, so
//! that its corner cases (oversubscription, `--ntasks-per-core`, skipped sibling threads) are
//! Slurm's.

use super::geometry::Geometry;

/// What the layout needs from the step.
#[derive(Debug, Clone, Copy)]
pub struct Lay {
    /// Tasks on this node.
    pub tasks: u32,
    /// CPUs per task (1 without `-c`).
    pub cpus_per_task: u32,
    /// Threads of a core a task may take (`--threads-per-core`, or 1 with one thread per
    /// core); 0 for no limit.
    pub threads_per_core: u32,
    /// `--ntasks-per-core` (0: none).
    pub ntasks_per_core: u32,
    /// `--ntasks-per-socket` (0: none; the block layout only, as in Slurm).
    pub ntasks_per_socket: u32,
    /// The binding unit is a core (skip the rest of a task's last core).
    pub to_cores: bool,
    /// `-m *:fcyclic`: a task's own CPUs go round the sockets too.
    pub fcyclic: bool,
}

/// Why the layout failed, as Slurm says it.
pub type LayoutError = String;

/// The checks both layouts make first, and the CPUs a task gets once the step has fewer CPUs
/// than its tasks ask for (with `--overcommit`).
fn checked(avail: &[bool], lay: &Lay, g: Geometry) -> Result<u32, LayoutError> {
    let size = avail.iter().filter(|a| **a).count() as u32;
    if let Some(per) = g.threads.checked_div(lay.threads_per_core) {
        let need = lay.cpus_per_task * per;
        if size < need {
            return Err(format!(
                "only {size} CPUs for the step, and its threads per core need {need}"
            ));
        }
    }
    if size < lay.tasks {
        return Err(format!(
            "only {size} CPUs for the step's {} task(s)",
            lay.tasks
        ));
    }
    Ok(if size < lay.tasks * lay.cpus_per_task {
        size / lay.tasks
    } else {
        lay.cpus_per_task
    })
}

/// The threads of a task's last core left unused when binding to cores.
fn unused_threads(cpt: u32, threads: u32) -> u32 {
    if cpt < threads {
        threads - cpt
    } else {
        cpt % threads
    }
}

/// The cyclic layout: each task from the next socket in turn, each socket's CPUs in order.
pub fn cyclic(g: Geometry, avail: &[bool], lay: &Lay) -> Result<Vec<Vec<bool>>, LayoutError> {
    let cpt = checked(avail, lay, g)?;
    let size = g.pus() as usize;
    let sockets = g.sockets as usize;
    let offset = g.socket_pus();
    let mut core_tasks = vec![0u32; g.all_cores() as usize];
    let mut core_threads = vec![0u32; g.all_cores() as usize];
    let mut last_pu = vec![0u32; sockets];
    let mut masks = vec![vec![false; size]; lay.tasks as usize];
    let (mut s, mut p, mut done) = (0usize, 0u32, 0u32);
    while done < lay.tasks {
        let before = done;
        for _ in 0..size {
            let mut switched = false;
            let first = s;
            while last_pu[s] >= offset {
                s = (s + 1) % sockets;
                if s == first {
                    core_tasks.fill(0);
                    core_threads.fill(0);
                    last_pu.fill(0);
                }
            }
            let bit = ((last_pu[s] + s as u32 * offset) as usize) % size;
            last_pu[s] += 1;
            if !avail[bit] {
                continue;
            }
            let core = bit / g.threads as usize;
            if lay.ntasks_per_core != 0 && core_tasks[core] >= lay.ntasks_per_core {
                continue;
            }
            if lay.threads_per_core != 0 && core_threads[core] >= lay.threads_per_core {
                continue;
            }
            masks[done as usize][bit] = true;
            if lay.fcyclic {
                s = (s + 1) % sockets;
                switched = true;
            }
            core_threads[core] += 1;
            p += 1;
            if p < cpt {
                continue;
            }
            core_tasks[core] += 1;
            if lay.to_cores || lay.ntasks_per_core == 1 {
                last_pu[s] += unused_threads(cpt, g.threads);
            }
            p = 0;
            if !switched {
                s = (s + 1) % sockets;
            }
            done += 1;
            if done >= lay.tasks {
                break;
            }
        }
        if done == before {
            return Err("the cyclic layout found no CPU for a task".into());
        }
    }
    Ok(masks)
}

/// The block layout: the step's CPUs in order, a task's CPUs together; once every CPU is
/// taken, again from the first (oversubscribing).
pub fn block(g: Geometry, avail: &[bool], lay: &Lay) -> Result<Vec<Vec<bool>>, LayoutError> {
    let cpt = checked(avail, lay, g)?;
    let size = g.pus() as usize;
    let mut core_tasks = vec![0u32; g.all_cores() as usize];
    let mut core_threads = vec![0u32; g.all_cores() as usize];
    let mut socket_tasks = vec![0u32; g.sockets as usize];
    let mut masks = vec![vec![false; size]; lay.tasks as usize];
    let (mut c, mut done) = (0u32, 0u32);
    while done < lay.tasks {
        let before = done;
        if done > 0 {
            core_tasks.fill(0);
            core_threads.fill(0);
            socket_tasks.fill(0);
        }
        let mut i = 0usize;
        while i < size {
            let at = i;
            i += 1;
            if !avail[at] {
                continue;
            }
            let core = at / g.threads as usize;
            let sock = at / g.socket_pus() as usize;
            if (lay.ntasks_per_core != 0 && core_tasks[core] >= lay.ntasks_per_core)
                || (lay.ntasks_per_socket != 0 && socket_tasks[sock] >= lay.ntasks_per_socket)
                || (lay.threads_per_core != 0 && core_threads[core] >= lay.threads_per_core)
            {
                continue;
            }
            masks[done as usize][at] = true;
            core_threads[core] += 1;
            c += 1;
            if c < cpt {
                continue;
            }
            core_tasks[core] += 1;
            socket_tasks[sock] += 1;
            if lay.to_cores || lay.ntasks_per_core == 1 {
                i += unused_threads(cpt, g.threads) as usize;
            }
            c = 0;
            done += 1;
            if done >= lay.tasks {
                break;
            }
        }
        if done == before {
            return Err("the block layout found no CPU for a task".into());
        }
    }
    Ok(masks)
}

/// The unit a mask is widened to before it becomes the task's binding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// As laid out.
    Threads,
    /// Every available thread of each core the task has.
    Cores,
    /// Every available CPU of each socket the task has.
    Sockets,
}

/// Each mask widened to `unit` within `avail`.
pub fn expand(g: Geometry, avail: &[bool], masks: &mut [Vec<bool>], unit: Unit) {
    let blot = match unit {
        Unit::Threads => return,
        Unit::Cores if g.threads < 2 => return,
        Unit::Cores => g.threads as usize,
        Unit::Sockets if g.socket_pus() < 2 => return,
        Unit::Sockets => g.socket_pus() as usize,
    };
    for mask in masks {
        let starts: Vec<usize> = (0..mask.len())
            .filter(|&i| mask[i])
            .map(|i| i / blot * blot)
            .collect();
        for start in starts {
            for j in start..start + blot {
                mask[j] |= avail[j];
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const G: Geometry = Geometry {
        sockets: 2,
        cores: 2,
        threads: 2,
    };

    fn lay(tasks: u32, cpt: u32) -> Lay {
        Lay {
            tasks,
            cpus_per_task: cpt,
            threads_per_core: 0,
            ntasks_per_core: 0,
            ntasks_per_socket: 0,
            to_cores: false,
            fcyclic: false,
        }
    }

    fn sets(masks: &[Vec<bool>]) -> Vec<Vec<usize>> {
        masks
            .iter()
            .map(|m| (0..m.len()).filter(|&i| m[i]).collect())
            .collect()
    }

    // Abstract PUs of G: socket 0 = 0-3 (core 0: 0,1; core 1: 2,3), socket 1 = 4-7.

    #[test]
    fn cyclic_alternates_sockets_and_fills_threads_in_order() {
        let all = [true; 8];
        let m = cyclic(G, &all, &lay(4, 1)).unwrap();
        assert_eq!(sets(&m), vec![vec![0], vec![4], vec![1], vec![5]]);
        let m = cyclic(
            G,
            &all,
            &Lay {
                to_cores: true,
                ..lay(4, 1)
            },
        )
        .unwrap();
        // Binding to cores skips the sibling: each task starts a core of its own.
        assert_eq!(sets(&m), vec![vec![0], vec![4], vec![2], vec![6]]);
        let m = cyclic(
            G,
            &all,
            &Lay {
                fcyclic: true,
                ..lay(2, 2)
            },
        )
        .unwrap();
        assert_eq!(sets(&m), vec![vec![0, 4], vec![1, 5]]);
    }

    #[test]
    fn block_fills_in_order_and_oversubscribes_from_the_start() {
        let all = [true; 8];
        let m = block(G, &all, &lay(3, 2)).unwrap();
        assert_eq!(sets(&m), vec![vec![0, 1], vec![2, 3], vec![4, 5]]);
        let m = block(
            G,
            &all,
            &Lay {
                ntasks_per_socket: 1,
                ..lay(2, 1)
            },
        )
        .unwrap();
        assert_eq!(sets(&m), vec![vec![0], vec![4]]);
        let few = [true, true, false, false, false, false, false, false];
        assert!(block(G, &few, &lay(3, 1))
            .unwrap_err()
            .contains("only 2 CPUs"));
    }

    #[test]
    fn expansion_widens_within_the_step() {
        let avail = [true, true, true, false, true, true, true, true];
        let mut m = vec![vec![false; 8]; 2];
        m[0][2] = true;
        m[1][4] = true;
        expand(G, &avail, &mut m, Unit::Cores);
        assert_eq!(sets(&m), vec![vec![2], vec![4, 5]]);
        expand(G, &avail, &mut m, Unit::Sockets);
        assert_eq!(sets(&m), vec![vec![0, 1, 2], vec![4, 5, 6, 7]]);
    }
}
