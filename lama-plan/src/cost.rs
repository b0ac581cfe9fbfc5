//! The cost model: cost = Σ over pairs of ranks of volume × distance, where the distance of two
//! PUs is the cost of the closest level that contains both.
//!
//! Levels, closest first: the same PU (0), the same core, L2 cache, L3 cache, NUMA node,
//! package, node, leaf switch, and anything farther. The costs follow each machine's real
//! nesting, not the level names: the node-internal levels present are sorted by the size of
//! their objects (PUs per object, smallest first) and given the node-internal costs in
//! ascending order. On a usual machine that changes nothing; where a NUMA node holds several
//! packages, the package (the smaller object) gets the NUMA cost and the NUMA node the package
//! cost, so two ranks in one package cost less than two ranks in one NUMA node but different
//! packages, as a program feels it (with the names' costs both pairs would cost the same). A
//! pair costs the cost of the smallest object both share.

use crate::network::Network;
use lama_engine::{Level, Machine};
use std::fmt;

/// The cost of each level.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Distances {
    /// Two hardware threads of one core.
    pub core: f64,
    /// The same L2 cache.
    pub l2: f64,
    /// The same L3 cache.
    pub l3: f64,
    /// The same NUMA node.
    pub numa: f64,
    /// The same package.
    pub package: f64,
    /// The same node.
    pub node: f64,
    /// Two nodes on the same leaf switch.
    pub switch: f64,
    /// Anything farther.
    pub farther: f64,
}

impl Default for Distances {
    /// Each level about twice the one inside it; the network an order of magnitude above a
    /// node: core 1, l2 2, l3 4, numa 8, package 16, node 32, switch 256, farther 512.
    fn default() -> Self {
        Distances {
            core: 1.0,
            l2: 2.0,
            l3: 4.0,
            numa: 8.0,
            package: 16.0,
            node: 32.0,
            switch: 256.0,
            farther: 512.0,
        }
    }
}

const KEYS: &str = "core, l2, l3, numa, package, node, switch, farther";

impl Distances {
    /// Parses overrides such as `switch=1000,farther=4000` on top of the defaults.
    pub fn parse(text: &str) -> Result<Distances, String> {
        let mut d = Distances::default();
        for item in text.split(',').filter(|s| !s.trim().is_empty()) {
            let (k, v) = item
                .split_once('=')
                .ok_or_else(|| format!("'{item}' is not LEVEL=COST (levels: {KEYS})"))?;
            let v: f64 = v
                .trim()
                .parse()
                .ok()
                .filter(|v: &f64| v.is_finite() && *v >= 0.0)
                .ok_or_else(|| format!("'{v}' is not a cost (a number, 0 or more)"))?;
            let slot = match k.trim() {
                "core" => &mut d.core,
                "l2" => &mut d.l2,
                "l3" => &mut d.l3,
                "numa" => &mut d.numa,
                "package" => &mut d.package,
                "node" => &mut d.node,
                "switch" => &mut d.switch,
                "farther" => &mut d.farther,
                other => return Err(format!("unknown level '{other}' (levels: {KEYS})")),
            };
            *slot = v;
        }
        Ok(d)
    }

    /// The costs of the node-internal levels, in the order of [`LEVELS`].
    fn inside(&self) -> [f64; 5] {
        [self.core, self.l2, self.l3, self.numa, self.package]
    }
}

impl fmt::Display for Distances {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "core={} l2={} l3={} numa={} package={} node={} switch={} farther={}",
            self.core,
            self.l2,
            self.l3,
            self.numa,
            self.package,
            self.node,
            self.switch,
            self.farther
        )
    }
}

/// The node-internal levels of the model.
pub const LEVELS: [Level; 5] = [
    Level::Core,
    Level::L2,
    Level::L3,
    Level::Numa,
    Level::Socket,
];

const NONE: u32 = u32::MAX;

/// For one machine: per logical PU, the smallest object of each of [`LEVELS`] holding it, and
/// the cost of sharing an object of each level on this machine (by nesting, as the module
/// says; `None` for a level the machine does not have).
#[derive(Debug, Clone, PartialEq)]
pub struct Geometry {
    ids: Vec<[u32; 5]>,
    costs: [Option<f64>; 5],
}

/// The cost of sharing each of [`LEVELS`] on `m`: the levels present (one object over the whole
/// machine does not count), sorted by the mean size of their objects (ties in [`LEVELS`]
/// order), get the node-internal costs of the levels present in ascending order.
fn nested_costs(m: &Machine, d: &Distances) -> [Option<f64>; 5] {
    let inside = d.inside();
    let mut present: Vec<(f64, usize)> = Vec::new();
    let all = m.pus().len() as u32;
    for (k, &level) in LEVELS.iter().enumerate() {
        let objs = m.objects(level);
        // One object over the whole machine is the node itself (hwloc gives a one-NUMA-node
        // machine its NUMA node): it separates nothing and costs the node's distance.
        let whole = objs.len() == 1 && objs[0].pus.end - objs[0].pus.start >= all;
        if !objs.is_empty() && !whole {
            let pus: u64 = objs
                .iter()
                .map(|o| u64::from(o.pus.end - o.pus.start))
                .sum();
            present.push((pus as f64 / objs.len() as f64, k));
        }
    }
    present.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let mut costs: Vec<f64> = present.iter().map(|&(_, k)| inside[k]).collect();
    costs.sort_by(f64::total_cmp);
    let mut out = [None; 5];
    for (&(_, k), c) in present.iter().zip(costs) {
        out[k] = Some(c);
    }
    out
}

impl Geometry {
    /// Computes the geometry of a machine under these distances.
    pub fn new(m: &Machine, d: &Distances) -> Geometry {
        let mut ids = vec![[NONE; 5]; m.pus().len()];
        for (k, &level) in LEVELS.iter().enumerate() {
            let objs = m.objects(level);
            let mut size = vec![u32::MAX; ids.len()];
            for (o, obj) in objs.iter().enumerate() {
                let len = obj.pus.end - obj.pus.start;
                for p in obj.pus.clone() {
                    let p = p as usize;
                    if p < ids.len() && len < size[p] {
                        size[p] = len;
                        ids[p][k] = o as u32;
                    }
                }
            }
        }
        Geometry {
            ids,
            costs: nested_costs(m, d),
        }
    }

    /// The object of level `LEVELS[k]` that holds PU `pu`, where the model counts that level.
    pub(crate) fn object(&self, pu: u32, k: usize) -> Option<u32> {
        let id = *self.ids.get(pu as usize)?.get(k)?;
        (id != NONE && self.costs[k].is_some()).then_some(id)
    }

    /// The cost of two PUs sharing an object of `level` (one of [`LEVELS`]) on this machine.
    pub fn level_cost(&self, level: Level) -> Option<f64> {
        let k = LEVELS.iter().position(|&l| l == level)?;
        self.costs[k]
    }
}

/// The nodes of a plan with their machines, geometries and places in the network.
#[derive(Debug)]
pub struct System<'m> {
    machines: Vec<&'m Machine>,
    geometry: Vec<Geometry>,
    /// Leaf switch of each node.
    leaf: Vec<usize>,
    distances: Distances,
}

/// A rank's place: node index and logical PU index.
pub type Spot = (u32, u32);

impl<'m> System<'m> {
    /// The system of these nodes (machines and names in the same order) on `network`.
    pub fn new(
        machines: Vec<&'m Machine>,
        names: &[String],
        network: &Network,
        distances: Distances,
    ) -> Result<System<'m>, String> {
        let mut leaf = Vec::with_capacity(names.len());
        for n in names {
            let path = network
                .path(n)
                .ok_or_else(|| format!("node {n} is under no switch of the network"))?;
            leaf.push(path[0]);
        }
        let geometry = machines
            .iter()
            .map(|m| Geometry::new(m, &distances))
            .collect();
        Ok(System {
            machines,
            geometry,
            leaf,
            distances,
        })
    }

    /// The machines.
    pub fn machines(&self) -> &[&'m Machine] {
        &self.machines
    }

    /// The distances in use.
    pub fn distances(&self) -> Distances {
        self.distances
    }

    /// The leaf switch of each node.
    pub fn leaf_switches(&self) -> &[usize] {
        &self.leaf
    }

    /// The distance of two places.
    pub fn distance(&self, a: Spot, b: Spot) -> f64 {
        let d = &self.distances;
        if a.0 != b.0 {
            return if self.leaf[a.0 as usize] == self.leaf[b.0 as usize] {
                d.switch
            } else {
                d.farther
            };
        }
        if a.1 == b.1 {
            return 0.0;
        }
        let g = &self.geometry[a.0 as usize];
        let (x, y) = (&g.ids[a.1 as usize], &g.ids[b.1 as usize]);
        let mut best = d.node;
        for k in 0..LEVELS.len() {
            if let Some(c) = g.costs[k] {
                if x[k] != NONE && x[k] == y[k] && c < best {
                    best = c;
                }
            }
        }
        best
    }

    /// The geometry of node `n`.
    pub fn geometry(&self, n: usize) -> &Geometry {
        &self.geometry[n]
    }

    /// The cost of a placement of the matrix's ranks (`spots[rank]`).
    pub fn cost(&self, matrix: &crate::matrix::CommMatrix, spots: &[Spot]) -> f64 {
        matrix
            .pairs()
            .iter()
            .map(|&(i, j, v)| v * self.distance(spots[i as usize], spots[j as usize]))
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matrix::CommMatrix;

    #[test]
    fn distances_by_level() {
        let m = Machine::synthetic("pack:2 numa:1 l3:1 l2:2 core:1 pu:2").unwrap();
        let names = vec!["a".to_string(), "b".to_string()];
        let net = Network::single_switch(&names);
        let s = System::new(vec![&m, &m], &names, &net, Distances::default()).unwrap();
        assert_eq!(s.distance((0, 0), (0, 0)), 0.0);
        assert_eq!(s.distance((0, 0), (0, 1)), 1.0); // same core
        assert_eq!(s.distance((0, 0), (0, 2)), 4.0); // same L3
        assert_eq!(s.distance((0, 0), (0, 4)), 32.0); // other package
        assert_eq!(s.distance((0, 0), (1, 0)), 256.0); // same switch
        let matrix = CommMatrix::from_entries(2, [(0, 1, 3.0)]);
        assert_eq!(s.cost(&matrix, &[(0, 0), (0, 2)]), 12.0);
    }

    #[test]
    fn a_numa_node_holding_two_packages_still_tells_packages_apart() {
        // Two NUMA nodes, each over two packages of two cores (checked by hand: PUs 0-1
        // package 0, 2-3 package 1, both in NUMA node 0; 4-7 NUMA node 1). By the names' costs
        // a pair in one package and a pair across the packages of one NUMA node would both
        // cost numa=8; by nesting the package (2 PUs) is inside the NUMA node (4 PUs), so the
        // package costs 8 and the NUMA node 16.
        let m = Machine::synthetic("numa:2 pack:2 core:2 pu:1").unwrap();
        let names = vec!["a".to_string()];
        let net = Network::single_switch(&names);
        let s = System::new(vec![&m], &names, &net, Distances::default()).unwrap();
        assert_eq!(s.distance((0, 0), (0, 1)), 8.0);
        assert_eq!(s.distance((0, 0), (0, 2)), 16.0);
        assert_eq!(s.distance((0, 0), (0, 4)), 32.0);
        assert_eq!(s.geometry(0).level_cost(Level::Socket), Some(8.0));
        assert_eq!(s.geometry(0).level_cost(Level::Numa), Some(16.0));
        assert_eq!(s.geometry(0).level_cost(Level::L3), None);
        // One NUMA node over the whole machine is the node: it separates nothing, and the
        // package keeps its own cost.
        let one = Machine::synthetic("numa:1 pack:2 core:2 pu:1").unwrap();
        let s = System::new(vec![&one], &names, &net, Distances::default()).unwrap();
        assert_eq!(s.distance((0, 0), (0, 1)), 16.0);
        assert_eq!(s.distance((0, 0), (0, 2)), 32.0);
        assert_eq!(s.geometry(0).level_cost(Level::Numa), None);
        // The usual nesting keeps the names' costs.
        let usual = Machine::synthetic("pack:2 numa:2 core:2 pu:1").unwrap();
        let s = System::new(vec![&usual], &names, &net, Distances::default()).unwrap();
        assert_eq!(s.distance((0, 0), (0, 1)), 8.0);
        assert_eq!(s.distance((0, 0), (0, 2)), 16.0);
    }

    #[test]
    fn the_network_separates_switches() {
        let m = Machine::synthetic("pack:1 core:1 pu:1").unwrap();
        let names: Vec<String> = ["n1", "n2", "n3"].iter().map(|s| s.to_string()).collect();
        let net = Network::parse("SwitchName=a Nodes=n[1-2]\nSwitchName=b Nodes=n3\n").unwrap();
        let s = System::new(vec![&m, &m, &m], &names, &net, Distances::default()).unwrap();
        assert_eq!(s.distance((0, 0), (1, 0)), 256.0);
        assert_eq!(s.distance((0, 0), (2, 0)), 512.0);
        let missing = Network::parse("SwitchName=a Nodes=n1\n").unwrap();
        assert!(
            System::new(vec![&m, &m], &names[..2], &missing, Distances::default())
                .unwrap_err()
                .contains("node n2 is under no switch")
        );
    }

    #[test]
    fn overrides() {
        let d = Distances::parse("switch=1000, farther=4000").unwrap();
        assert_eq!((d.switch, d.farther, d.core), (1000.0, 4000.0, 1.0));
        assert!(Distances::parse("rack=3")
            .unwrap_err()
            .contains("unknown level 'rack'"));
        assert!(Distances::parse("core=-1")
            .unwrap_err()
            .contains("not a cost"));
        assert!(Distances::parse("core").unwrap_err().contains("LEVEL=COST"));
    }
}
