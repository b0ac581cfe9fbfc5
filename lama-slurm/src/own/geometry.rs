//! The node as Slurm's task/affinity counts it: sockets x cores x threads, every PU at its
//! "abstract" index `(socket * cores + core) * threads + thread`, which slurmd's block map
//! turns into an OS index (built from hwloc's objects in logical order).

use lama_engine::{Level, Machine};

/// A node's regular shape, with the abstract index of each PU equal to its logical index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Geometry {
    /// Sockets (hwloc packages; one when the topology names none).
    pub sockets: u32,
    /// Cores in each socket.
    pub cores: u32,
    /// Hardware threads in each core.
    pub threads: u32,
}

impl Geometry {
    /// The shape of `m`, or why Slurm's model of it is not this one: task/affinity counts
    /// every socket with as many cores and every core with as many threads (a hybrid or an
    /// uneven node is not previewed rather than previewed wrong).
    pub fn of(m: &Machine) -> Result<Geometry, String> {
        let cores = m.objects(Level::Core);
        let pus = m.pus().len() as u32;
        if cores.is_empty() || pus == 0 {
            return Err("the topology has no cores".into());
        }
        let threads = cores[0].pus.len() as u32;
        let sockets = m.objects(Level::Socket).len().max(1) as u32;
        let per_socket = cores.len() as u32 / sockets;
        let even_cores = cores.iter().all(|c| c.pus.len() as u32 == threads);
        let even_sockets = m.objects(Level::Socket).iter().all(|s| {
            s.pus.len() as u32 == per_socket * threads
                && s.pus.start % (per_socket * threads).max(1) == 0
        });
        let contiguous = cores
            .iter()
            .enumerate()
            .all(|(i, c)| c.pus.start == i as u32 * threads);
        if !even_cores || !even_sockets || !contiguous || per_socket * sockets * threads != pus {
            return Err(
                "Slurm's task/affinity counts sockets x cores x threads alike, and this \
                        node is not so shaped (cores with different thread counts, or sockets \
                        with different core counts): its own placement is not modelled here"
                    .into(),
            );
        }
        Ok(Geometry {
            sockets,
            cores: per_socket,
            threads,
        })
    }

    /// PUs on the node.
    pub fn pus(self) -> u32 {
        self.sockets * self.cores * self.threads
    }

    /// Cores on the node.
    pub fn all_cores(self) -> u32 {
        self.sockets * self.cores
    }

    /// PUs in a socket.
    pub fn socket_pus(self) -> u32 {
        self.cores * self.threads
    }
}

/// How much of each kind of object a set of PUs (`avail[i]`, abstract order) holds whole and
/// in part, as task/affinity's `_alloc_mask` counts them.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Wholes {
    /// The whole node.
    pub node: bool,
    /// Whole sockets.
    pub sockets: u32,
    /// Sockets in part.
    pub part_sockets: u32,
    /// Whole cores.
    pub cores: u32,
    /// Cores in part.
    pub part_cores: u32,
    /// Threads.
    pub threads: u32,
}

impl Wholes {
    /// The counts of `avail` on `g`.
    pub fn of(g: Geometry, avail: &[bool]) -> Wholes {
        let mut w = Wholes::default();
        let mut node_miss = false;
        for s in 0..g.sockets {
            let (mut core_hit, mut core_miss) = (false, false);
            for c in 0..g.cores {
                let base = ((s * g.cores + c) * g.threads) as usize;
                let hit = avail[base..base + g.threads as usize]
                    .iter()
                    .filter(|a| **a)
                    .count() as u32;
                w.threads += hit;
                if hit == g.threads {
                    w.cores += 1;
                    core_hit = true;
                } else {
                    core_miss = true;
                    if hit > 0 {
                        w.part_cores += 1;
                        core_hit = true;
                    }
                }
            }
            if !core_miss {
                w.sockets += 1;
            } else {
                node_miss = true;
                if core_hit {
                    w.part_sockets += 1;
                }
            }
        }
        w.node = !node_miss;
        w
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_regular_node_is_sockets_cores_threads() {
        let m = Machine::synthetic("pack:2 core:4 pu:2").unwrap();
        let g = Geometry::of(&m).unwrap();
        assert_eq!((g.sockets, g.cores, g.threads), (2, 4, 2));
        assert_eq!(g.pus(), 16);
    }

    #[test]
    fn wholes_count_as_slurm_does() {
        let g = Geometry {
            sockets: 2,
            cores: 2,
            threads: 2,
        };
        // socket 0 whole, socket 1: core 2 whole, core 3 half.
        let avail = [true, true, true, true, true, true, true, false];
        let w = Wholes::of(g, &avail);
        assert_eq!(
            w,
            Wholes {
                node: false,
                sockets: 1,
                part_sockets: 1,
                cores: 3,
                part_cores: 1,
                threads: 7
            }
        );
    }
}
