//! The pseudo-random order of the partitioners' starts, matchings and searches: a xorshift
//! generator with a fixed state per seed, so that a plan is the same on every machine.

/// The state of the pseudo-random generator of [`shuffle`] for `seed` (never zero).
pub(crate) fn seeded(seed: u64) -> u64 {
    seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1
}

/// Shuffles `items` in place (Fisher–Yates) with a xorshift generator whose state is `rng`,
/// which it advances: the same state gives the same order on every machine.
pub(crate) fn shuffle<T>(items: &mut [T], rng: &mut u64) {
    for i in (1..items.len()).rev() {
        *rng ^= *rng << 13;
        *rng ^= *rng >> 7;
        *rng ^= *rng << 17;
        items.swap(i, (*rng % (i as u64 + 1)) as usize);
    }
}
