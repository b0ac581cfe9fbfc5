//! The stencil path: when the ranks form a Cartesian grid (`--grid D0xD1xD2` in the order
//! `MPI_Dims_create` returns the sizes, ranks numbered as `MPI_Cart_create` numbers them: the
//! last coordinate fastest; or recognised from the matrix), the machine tree is filled by
//! cutting the grid geometrically: at every tree vertex the ranks' box is cut into one part per
//! child, sized to its child's share, by recursive coordinate bisection (each cut across the
//! dimension that cuts the least volume, a part that is not whole rows taking a staircase
//! along the next dimension, and each cut then refined by the bisection's Fiduccia–Mattheyses
//! passes); each part then descends into its child. No graph partitioner runs: the cost is a
//! few sorts and one refinement per cut, which is what makes it fast (Hunold et al.,
//! "Efficient process-to-node mapping algorithms for stencil computations", 2020, cut the grid
//! the same way for the nodes).

use crate::matrix::CommMatrix;
use std::fmt;

/// A Cartesian grid of ranks. Written (and parsed) in MPI's order, the slowest-varying size
/// first; kept with the fastest-varying size first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grid {
    dims: Vec<u32>,
}

impl fmt::Display for Grid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d: Vec<String> = self.dims.iter().rev().map(u32::to_string).collect();
        write!(f, "{}", d.join("x"))
    }
}

/// Most dimensions a grid may have.
const MAX_DIMS: usize = 3;

impl Grid {
    /// `48x44` or `16x12x11` (1 to 3 dimensions, each at least 1, as `MPI_Dims_create`
    /// gives them: the last varies fastest in rank order), for `ranks` ranks.
    pub fn parse(text: &str, ranks: u32) -> Result<Grid, String> {
        let mut dims: Vec<u32> = text
            .split('x')
            .map(|d| d.trim().parse::<u32>().ok().filter(|&d| d >= 1))
            .collect::<Option<Vec<u32>>>()
            .filter(|d| (1..=MAX_DIMS).contains(&d.len()))
            .ok_or_else(|| {
                format!("--grid '{text}': give 1 to 3 sizes of at least 1 joined by x, e.g. 48x44")
            })?;
        let product = dims
            .iter()
            .try_fold(1u64, |p, &d| p.checked_mul(u64::from(d)));
        if product != Some(u64::from(ranks)) {
            return Err(format!(
                "--grid {text} holds {} ranks but the matrix has {ranks}: the sizes' product \
                 must be the rank count (as MPI_Dims_create's)",
                product.map_or("too many".to_string(), |p| p.to_string())
            ));
        }
        dims.reverse();
        Ok(Grid { dims })
    }

    /// The grid a matrix is a stencil on, when every pair that talks is two neighbours of one
    /// (differences 1, X and X*Y, never across a row's end, no wrap-around), with at least two
    /// sizes above 1; else `None`.
    pub fn recognise(matrix: &CommMatrix) -> Option<Grid> {
        let n = matrix.ranks();
        let mut diffs: Vec<u32> = Vec::new();
        for &(i, j, _) in matrix.pairs() {
            let d = j - i;
            if !diffs.contains(&d) {
                if diffs.len() == MAX_DIMS {
                    return None;
                }
                diffs.push(d);
            }
        }
        diffs.sort_unstable();
        if diffs.first() != Some(&1) {
            return None;
        }
        let mut dims = Vec::new();
        for w in diffs.windows(2) {
            if w[1] % w[0] != 0 || w[1] == w[0] {
                return None;
            }
            dims.push(w[1] / w[0]);
        }
        let last = *diffs.last()?;
        if n % last != 0 || n / last < 2 {
            return None;
        }
        dims.push(n / last);
        let grid = Grid { dims };
        let fits = |&(i, j, _): &(u32, u32, f64)| {
            let k = diffs.iter().position(|&d| d == j - i).unwrap_or(0);
            grid.coord(i, k) + 1 < grid.dims[k]
        };
        (grid.dims.iter().filter(|&&d| d > 1).count() >= 2 && matrix.pairs().iter().all(fits))
            .then_some(grid)
    }

    /// The grid's sizes, fastest-varying first.
    pub fn dims(&self) -> &[u32] {
        &self.dims
    }

    /// Coordinate `k` of rank `r`.
    fn coord(&self, r: u32, k: usize) -> u32 {
        let below: u32 = self.dims[..k].iter().product();
        (r / below) % self.dims[k]
    }
}

/// Maps the grid's ranks to slots (whose tree coordinates are `coords`; `near` the ranks'
/// neighbours with volumes): the slot of each rank.
pub(crate) fn map(grid: &Grid, near: &[Vec<(u32, f64)>], coords: &[Vec<u32>]) -> Vec<usize> {
    let np = near.len();
    let mut work = Work {
        grid,
        near,
        coords,
        mark: vec![0; np],
        local: vec![u32::MAX; np],
        out: vec![usize::MAX; np],
    };
    work.place((0..np as u32).collect(), (0..coords.len()).collect(), 0);
    work.out
}

struct Work<'a> {
    grid: &'a Grid,
    near: &'a [Vec<(u32, f64)>],
    coords: &'a [Vec<u32>],
    /// Scratch: 1 for a rank in the set being cut, 2 for one on its first side.
    mark: Vec<u8>,
    /// Scratch: a rank's index in the set being refined, `u32::MAX` elsewhere.
    local: Vec<u32>,
    out: Vec<usize>,
}

impl Work<'_> {
    /// Places `ranks` on `slots`, which share their coordinates above `depth`.
    fn place(&mut self, ranks: Vec<u32>, slots: Vec<usize>, depth: usize) {
        if crate::bisect::at_leaf(self.coords, &ranks, &slots, depth, &mut self.out[..]) {
            return;
        }
        let children = crate::bisect::children(self.coords, slots, depth);
        let caps: Vec<usize> = children.iter().map(Vec::len).collect();
        let sizes = shares(ranks.len(), &caps);
        let parts = self.split(ranks, &sizes);
        for (part, slots) in parts.into_iter().zip(children) {
            self.place(part, slots, depth + 1);
        }
    }

    /// `ranks` cut into parts of `sizes`, by halving the parts' list: each half's ranks on
    /// one side of one cut.
    fn split(&mut self, ranks: Vec<u32>, sizes: &[usize]) -> Vec<Vec<u32>> {
        if sizes.len() <= 1 {
            return vec![ranks];
        }
        let half = sizes.len() / 2;
        let first: usize = sizes[..half].iter().sum();
        let (a, b) = self.cut(ranks, first);
        let mut out = self.split(a, &sizes[..half]);
        out.extend(self.split(b, &sizes[half..]));
        out
    }

    /// `ranks` cut into the first `first` and the rest, across the dimension whose cut costs
    /// the least volume (the widest on ties): ranks sorted by that coordinate, then by the
    /// others, widest first (so a part of whole rows plus a staircase along one row); then
    /// refined. (Refining every dimension's cut and keeping the best gave 0.0-0.5 % less on
    /// the benchmark stencils for about twice the time.)
    fn cut(&mut self, ranks: Vec<u32>, first: usize) -> (Vec<u32>, Vec<u32>) {
        if first == 0 || first >= ranks.len() {
            return (ranks, Vec::new());
        }
        let d = self.grid.dims.len();
        let extent = |k: usize| -> u32 {
            let (lo, hi) = ranks.iter().fold((u32::MAX, 0), |(lo, hi), &r| {
                let c = self.grid.coord(r, k);
                (lo.min(c), hi.max(c))
            });
            hi - lo
        };
        let extents: Vec<u32> = (0..d).map(extent).collect();
        let mut best: Option<(f64, u32, Vec<u32>)> = None;
        for k in (0..d).filter(|&k| extents[k] > 0) {
            let mut others: Vec<usize> = (0..d).filter(|&o| o != k).collect();
            others.sort_by_key(|&o| std::cmp::Reverse(extents[o]));
            let mut order = ranks.clone();
            order.sort_by_key(|&r| {
                let mut key = [0u32; MAX_DIMS];
                key[0] = self.grid.coord(r, k);
                for (slot, &o) in key[1..].iter_mut().zip(&others) {
                    *slot = self.grid.coord(r, o);
                }
                (key, r)
            });
            let volume = self.volume(&order, first);
            let better = best
                .as_ref()
                .is_none_or(|(v, e, _)| volume < *v || (volume == *v && extents[k] > *e));
            if better {
                best = Some((volume, extents[k], order));
            }
        }
        let order = best.map_or(ranks, |(_, _, o)| o);
        self.refined(order, first).1
    }

    /// The first `first` of `order` and the rest, improved by Fiduccia–Mattheyses passes on
    /// the ranks' own graph (the bisection's, [`crate::bisect::refine`]: a geometric cut is
    /// the best of its shape, and a few moves across it can still lower the volume), with the
    /// volume between them.
    fn refined(&mut self, order: Vec<u32>, first: usize) -> (f64, (Vec<u32>, Vec<u32>)) {
        let graph = crate::bisect::induced(self.near, &order, &mut self.local);
        let mut side: Vec<bool> = (0..order.len()).map(|i| i < first).collect();
        let volume = crate::bisect::refine(&graph, &mut side, first);
        (volume, crate::bisect::sides(&order, &side))
    }

    /// The volume between the first `first` of `order` and the rest of it.
    fn volume(&mut self, order: &[u32], first: usize) -> f64 {
        for (i, &r) in order.iter().enumerate() {
            self.mark[r as usize] = if i < first { 2 } else { 1 };
        }
        let mut v = 0.0;
        for &r in &order[..first] {
            for &(q, w) in &self.near[r as usize] {
                if self.mark[q as usize] == 1 {
                    v += w;
                }
            }
        }
        for &r in order {
            self.mark[r as usize] = 0;
        }
        v
    }
}

/// How many of `n` ranks each child takes when nothing tells them apart (a grid's box, or a
/// part Scotch has nothing to cut in): its capacity when the ranks fill them all, else in proportion to capacity (largest remainders first), never above
/// it.
pub(crate) fn shares(n: usize, caps: &[usize]) -> Vec<usize> {
    let total: usize = caps.iter().sum();
    if n >= total {
        return caps.to_vec();
    }
    let mut want: Vec<usize> = caps.iter().map(|&c| c * n / total).collect();
    let mut left = n - want.iter().sum::<usize>();
    let mut order: Vec<usize> = (0..caps.len()).collect();
    // Largest remainder first; the first child on ties, so that a small job stays compact.
    order.sort_by_key(|&c| (std::cmp::Reverse((caps[c] * n) % total), c));
    for &c in order.iter().cycle().take(caps.len() * 2) {
        if left == 0 {
            break;
        }
        if want[c] < caps[c] {
            want[c] += 1;
            left -= 1;
        }
    }
    want
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_follow_capacity() {
        assert_eq!(shares(10, &[4, 6]), vec![4, 6]);
        assert_eq!(shares(12, &[4, 6]), vec![4, 6]);
        assert_eq!(shares(5, &[4, 6]), vec![2, 3]);
        assert_eq!(shares(1, &[3, 3, 3]), vec![1, 0, 0]);
        assert_eq!(shares(2, &[1, 8]), vec![0, 2]);
        for n in 0..=24 {
            let w = shares(n, &[5, 7, 12]);
            assert_eq!(w.iter().sum::<usize>(), n);
            assert!(w.iter().zip([5, 7, 12]).all(|(&a, c)| a <= c), "{n}: {w:?}");
        }
    }
    use crate::matrix::patterns;

    #[test]
    fn grids_are_recognised_from_their_matrix() {
        // stencil_2d(48, 44): rank x + 48 y, x fastest: MPI's 44 x 48.
        let g = Grid::recognise(&patterns::stencil_2d(48, 44)).unwrap();
        assert_eq!((g.dims(), g.to_string().as_str()), (&[48, 44][..], "44x48"));
        let g = Grid::recognise(&patterns::stencil_3d(16, 12, 11)).unwrap();
        assert_eq!(g.dims(), [16, 12, 11]);
        // A ring wraps around; a chain has one dimension; clustered traffic is no grid.
        assert_eq!(Grid::recognise(&patterns::ring(96)), None);
        let chain = CommMatrix::from_entries(8, (0..7).map(|i| (i, i + 1, 1.0)));
        assert_eq!(Grid::recognise(&chain), None);
        assert_eq!(Grid::recognise(&patterns::clustered(96, 8, 1)), None);
        // A periodic 2-D stencil (its wrap-around pairs cross the rows' ends): no.
        let mut e: Vec<(u32, u32, f64)> = patterns::stencil_2d(4, 4).pairs().to_vec();
        e.push((0, 3, 1.0));
        assert_eq!(Grid::recognise(&CommMatrix::from_entries(16, e)), None);
        // One pair across a row's end (3 to 4 in rows of 4): no.
        let mut e: Vec<(u32, u32, f64)> = patterns::stencil_2d(4, 4).pairs().to_vec();
        e.push((3, 4, 1.0));
        assert_eq!(Grid::recognise(&CommMatrix::from_entries(16, e)), None);
    }

    #[test]
    fn grids_are_parsed_against_the_rank_count() {
        let g = Grid::parse("48x44", 2112).unwrap();
        assert_eq!((g.dims(), g.to_string().as_str()), (&[44, 48][..], "48x44"));
        assert_eq!(Grid::parse("2112", 2112).unwrap().to_string(), "2112");
        for (bad, why) in [
            ("48x45", "holds 2160 ranks but the matrix has 2112"),
            ("48x0", "give 1 to 3 sizes"),
            ("2x2x2x264", "give 1 to 3 sizes"),
            ("48*44", "give 1 to 3 sizes"),
            ("4294967295x4294967295x4294967295", "holds too many ranks"),
        ] {
            let e = Grid::parse(bad, 2112).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    /// A 4 x 4 grid on two nodes of two packages of two pairs of cores, by hand: each node
    /// takes half the grid (4 pairs cross between the nodes, the fewest: two columns or two
    /// rows), and each package a 2 x 2 square of it (2 more pairs cross in each node).
    #[test]
    fn a_grid_is_cut_into_boxes() {
        let m = CommMatrix::from_entries(16, patterns::stencil_2d(4, 4).pairs().iter().copied());
        let grid = Grid::recognise(&m).unwrap();
        let mut near: Vec<Vec<(u32, f64)>> = vec![Vec::new(); 16];
        for &(i, j, v) in m.pairs() {
            near[i as usize].push((j, v));
            near[j as usize].push((i, v));
        }
        // Slots: node, package, core.
        let coords: Vec<Vec<u32>> = (0..16u32)
            .map(|s| vec![s / 8, (s / 4) % 2, (s / 2) % 2, s % 2])
            .collect();
        let out = map(&grid, &near, &coords);
        let node = |r: usize| out[r] / 8;
        let package = |r: usize| out[r] / 4;
        let crossing = |f: &dyn Fn(usize) -> usize| {
            m.pairs()
                .iter()
                .filter(|&&(i, j, _)| f(i as usize) != f(j as usize))
                .count()
        };
        assert_eq!(crossing(&node), 4);
        // Each package a 2 x 2 square: 4 pairs cross packages inside the nodes, 8 in all.
        assert_eq!(crossing(&package), 8);
        let mut used = out.clone();
        used.sort_unstable();
        assert_eq!(used, (0..16).collect::<Vec<usize>>());
    }

    proptest::proptest! {
        /// Any text is a grid or an error, never a panic; a grid's sizes multiply to the ranks
        /// and it reads back as written.
        #[test]
        fn any_grid_text(text in ".{0,40}", ranks in 0u32..5000) {
            if let Ok(g) = Grid::parse(&text, ranks) {
                proptest::prop_assert_eq!(g.dims().iter().map(|&d| u64::from(d)).product::<u64>(), u64::from(ranks));
                proptest::prop_assert_eq!(Grid::parse(&g.to_string(), ranks).unwrap(), g);
            }
        }

        /// Every grid of up to three sizes is recognised from its stencil (two sizes above 1),
        /// and the stencil path gives every rank its own slot.
        #[test]
        fn stencils_are_recognised_and_mapped(x in 1u32..12, y in 2u32..12, z in 1u32..5) {
            let m = if z == 1 { patterns::stencil_2d(x, y) } else { patterns::stencil_3d(x, y, z) };
            let g = Grid::recognise(&m);
            let sizes_above_one = [x, y, z].iter().filter(|&&d| d > 1).count();
            proptest::prop_assert_eq!(g.is_some(), sizes_above_one >= 2);
            if let Some(g) = g {
                let n = m.ranks() as usize;
                let mut near: Vec<Vec<(u32, f64)>> = vec![Vec::new(); n];
                for &(i, j, v) in m.pairs() {
                    near[i as usize].push((j, v));
                    near[j as usize].push((i, v));
                }
                let coords: Vec<Vec<u32>> = (0..n as u32 + 3).map(|s| vec![s / 8, (s / 2) % 4, s % 2]).collect();
                let mut out = map(&g, &near, &coords);
                out.sort_unstable();
                out.dedup();
                proptest::prop_assert_eq!(out.len(), n);
                proptest::prop_assert!(out.iter().all(|&s| s < coords.len()));
            }
        }
    }
}
