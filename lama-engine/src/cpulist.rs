//! CPU lists in the kernel's format (`0-3,8,10-11`), as in `cpuset.cpus` and `Cpus_allowed_list`.

use std::fmt;

/// The largest CPU number accepted in a list; larger values are rejected, not allocated.
pub const MAX_CPU: u32 = 1 << 20;

/// A sorted set of OS CPU indexes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct CpuList(Vec<u32>);

/// A CPU list that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid CPU list '{input}': {reason} (expected a list like 0-3,8,10-11)")]
pub struct CpuListError {
    /// The text given.
    pub input: String,
    /// What was wrong with it.
    pub reason: String,
}

impl CpuList {
    /// The empty list.
    pub fn new() -> Self {
        Self::default()
    }

    /// Builds a list from any CPU numbers (sorted and deduplicated).
    pub fn from_cpus(cpus: impl IntoIterator<Item = u32>) -> Self {
        let mut v: Vec<u32> = cpus.into_iter().collect();
        v.sort_unstable();
        v.dedup();
        CpuList(v)
    }

    /// Parses the kernel format. Blank input (an empty cpuset file) is the empty list.
    pub fn parse(input: &str) -> Result<Self, CpuListError> {
        let mut cpus = Vec::new();
        for (a, b) in Self::ranges(input)? {
            cpus.extend(a..=b);
        }
        Ok(Self::from_cpus(cpus))
    }

    /// The ranges of a list in the kernel format (`0-3,8` is `[(0, 3), (8, 8)]`), checked (each
    /// a number or a forward range, none above [`MAX_CPU`]) without expanding them, for callers
    /// that must bound what a list holds before they hold it. Blank input has no range.
    pub fn ranges(input: &str) -> Result<Vec<(u32, u32)>, CpuListError> {
        let err = |reason: String| CpuListError {
            input: input.to_string(),
            reason,
        };
        let num = |s: &str| -> Result<u32, CpuListError> {
            let n: u32 = s
                .parse()
                .map_err(|_| err(format!("'{s}' is not a CPU number")))?;
            if n > MAX_CPU {
                return Err(err(format!("CPU {n} is larger than {MAX_CPU}")));
            }
            Ok(n)
        };
        let text = input.trim();
        if text.is_empty() {
            return Ok(Vec::new());
        }
        text.split(',')
            .map(|part| match part.trim().split_once('-') {
                Some((a, b)) => {
                    let (a, b) = (num(a)?, num(b)?);
                    if a > b {
                        return Err(err(format!("range {a}-{b} runs backwards")));
                    }
                    Ok((a, b))
                }
                None => num(part.trim()).map(|n| (n, n)),
            })
            .collect()
    }

    /// The CPUs, ascending.
    pub fn cpus(&self) -> &[u32] {
        &self.0
    }

    /// Whether `cpu` is in the list.
    pub fn contains(&self, cpu: u32) -> bool {
        self.0.binary_search(&cpu).is_ok()
    }

    /// Whether the list is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Number of CPUs.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// The CPUs of both lists.
    pub fn intersection(&self, other: &CpuList) -> CpuList {
        CpuList(
            self.0
                .iter()
                .copied()
                .filter(|c| other.contains(*c))
                .collect(),
        )
    }
}

impl fmt::Display for CpuList {
    /// Kernel format with ranges, e.g. `0-3,8`; the empty list prints as nothing.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut i = 0;
        let mut first = true;
        while i < self.0.len() {
            let start = self.0[i];
            let mut end = start;
            while i + 1 < self.0.len() && self.0[i + 1] == end + 1 {
                i += 1;
                end = self.0[i];
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if start == end {
                write!(f, "{start}")?;
            } else {
                write!(f, "{start}-{end}")?;
            }
            i += 1;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_the_kernel_format() {
        assert_eq!(
            CpuList::parse("0-3,8,10-11\n").unwrap().cpus(),
            &[0, 1, 2, 3, 8, 10, 11]
        );
        assert!(CpuList::parse("").unwrap().is_empty());
        assert!(CpuList::parse("\n").unwrap().is_empty());
        assert_eq!(CpuList::parse("5,1,1").unwrap().cpus(), &[1, 5]);
    }

    #[test]
    fn rejects_garbage_with_a_reason() {
        let e = CpuList::parse("0-x").unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid CPU list '0-x': 'x' is not a CPU number (expected a list like 0-3,8,10-11)"
        );
        assert!(CpuList::parse("3-1")
            .unwrap_err()
            .reason
            .contains("backwards"));
        assert!(CpuList::parse("99999999")
            .unwrap_err()
            .reason
            .contains("larger"));
    }

    #[test]
    fn displays_ranges() {
        assert_eq!(
            CpuList::from_cpus([0, 1, 2, 5, 7, 8]).to_string(),
            "0-2,5,7-8"
        );
        assert_eq!(CpuList::new().to_string(), "");
    }

    proptest! {
        #[test]
        fn display_then_parse_is_identity(cpus in proptest::collection::vec(0u32..300, 0..40)) {
            let list = CpuList::from_cpus(cpus);
            prop_assert_eq!(CpuList::parse(&list.to_string()).unwrap(), list);
        }
    }
}
