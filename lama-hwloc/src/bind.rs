//! Kernel CPU affinity and memory policy of the calling process: the plugin's task in
//! `task_init`, and `lama exec` before it executes the program.

use lama_engine::CpuList;

/// Binds the calling process (and the threads it creates later, and what it executes) to
/// `cpus`. Fails, without changing anything, on an empty list; the kernel refuses CPUs outside
/// the task's cpuset with `EINVAL`.
pub fn set_affinity(cpus: &CpuList) -> Result<(), String> {
    let mask = cpu_mask(cpus).ok_or("no CPU to bind to")?;
    let size = std::mem::size_of_val(mask.as_slice());
    // SAFETY: `mask` is a live, initialised buffer of `size` bytes; the kernel reads at most
    // `size` bytes from it and treats it as a CPU bit mask (the layout of `cpu_set_t`, in
    // unsigned longs); pid 0 is the calling thread, whose mask new threads and exec inherit.
    let rc = unsafe { libc::sched_setaffinity(0, size, mask.as_ptr().cast::<libc::cpu_set_t>()) };
    if rc == 0 {
        Ok(())
    } else {
        Err(format!(
            "sched_setaffinity({cpus}) failed: {}",
            std::io::Error::last_os_error()
        ))
    }
}

/// The kernel's CPU mask (`cpu_set_t`'s layout, in unsigned longs) of `cpus`, as many words
/// as its highest CPU needs (past 1,024 CPUs, `cpu_set_t` itself is too small); `None` when
/// there is no CPU.
fn cpu_mask(cpus: &CpuList) -> Option<Vec<libc::c_ulong>> {
    let &max = cpus.cpus().last()?;
    Some(bit_mask(cpus, max as usize + 1))
}

/// The bits of `list` in unsigned longs, enough words for `width` bits.
fn bit_mask(list: &CpuList, width: usize) -> Vec<libc::c_ulong> {
    let bits = libc::c_ulong::BITS as usize;
    let mut mask: Vec<libc::c_ulong> = vec![0; width.div_ceil(bits)];
    for &c in list.cpus() {
        mask[c as usize / bits] |= 1 << (c as usize % bits);
    }
    mask
}

/// `set_mempolicy`'s node mask of `nodes`: one bit more than its highest node, since the
/// kernel reads `maxnode - 1` bits.
fn node_mask(nodes: &CpuList) -> Option<Vec<libc::c_ulong>> {
    let &max = nodes.cpus().last()?;
    Some(bit_mask(nodes, max as usize + 2))
}

/// The calling process's CPU affinity.
pub fn get_affinity() -> Result<CpuList, String> {
    let bits = libc::c_ulong::BITS as usize;
    // Grow until the kernel accepts the size (machines with more than 1024 CPUs).
    let mut words = 1024 / bits;
    loop {
        let mut mask: Vec<libc::c_ulong> = vec![0; words];
        let size = std::mem::size_of_val(mask.as_slice());
        // SAFETY: `mask` is a writable buffer of `size` bytes; the kernel writes at most that
        // many bytes of CPU mask into it.
        let rc = unsafe {
            libc::sched_getaffinity(0, size, mask.as_mut_ptr().cast::<libc::cpu_set_t>())
        };
        if rc == 0 {
            let cpus = (0..words * bits).filter(|&c| mask[c / bits] & (1 << (c % bits)) != 0);
            return Ok(CpuList::from_cpus(cpus.map(|c| c as u32)));
        }
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() == Some(libc::EINVAL) && words < (1 << 20) / bits {
            words *= 2;
            continue;
        }
        return Err(format!("sched_getaffinity failed: {err}"));
    }
}

/// `set_mempolicy` modes (`<linux/mempolicy.h>`).
const MPOL_PREFERRED: libc::c_int = 1;
const MPOL_BIND: libc::c_int = 2;
const MPOL_PREFERRED_MANY: libc::c_int = 5;

/// Sets the memory policy of the calling process (inherited by the threads it creates and
/// kept across `exec`) to the NUMA nodes `nodes` (OS indexes): `local` binds strictly
/// (`MPOL_BIND`), `preferred` prefers them (`MPOL_PREFERRED_MANY`; kernels before 5.15 lack it
/// and get `MPOL_PREFERRED` with the first node). `none` changes nothing. Returns the nodes
/// the policy in force names: `nodes`, or only the first of them after that fallback.
pub fn set_membind(policy: lama_engine::Membind, nodes: &CpuList) -> Result<CpuList, String> {
    use lama_engine::Membind;
    if nodes.is_empty() {
        return Err("no NUMA node to bind memory to".to_string());
    }
    let mode = match policy {
        Membind::None => return Ok(nodes.clone()),
        Membind::Local => MPOL_BIND,
        Membind::Preferred if nodes.len() == 1 => MPOL_PREFERRED,
        Membind::Preferred => MPOL_PREFERRED_MANY,
    };
    let bits = libc::c_ulong::BITS as usize;
    let mask = node_mask(nodes).expect("a node, checked above");
    let set = |mode: libc::c_int, mask: &[libc::c_ulong]| -> std::io::Result<()> {
        // SAFETY: `mask` is a live buffer of `mask.len()` unsigned longs; the kernel reads at
        // most `maxnode - 1` bits from it, and `maxnode` is its size in bits.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_set_mempolicy,
                mode,
                mask.as_ptr(),
                (mask.len() * bits) as libc::c_ulong,
            )
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    };
    let result = match set(mode, &mask) {
        Err(e) if mode == MPOL_PREFERRED_MANY && e.raw_os_error() == Some(libc::EINVAL) => {
            let n = CpuList::from_cpus([nodes.cpus()[0]]);
            let first = node_mask(&n).expect("one node");
            set(MPOL_PREFERRED, &first).map(|()| n)
        }
        other => other.map(|()| nodes.clone()),
    };
    result.map_err(|e| format!("set_mempolicy({policy}, nodes {nodes}) failed: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// NUMA nodes past 63 (a 128-node machine): each node's bit where the kernel reads it, and
    /// the spare bit `set_mempolicy` needs (node 127 takes a third word), checked by hand.
    #[test]
    fn node_masks_past_64_nodes() {
        let nodes = CpuList::parse("0,63-64,120,127").unwrap();
        let mask = node_mask(&nodes).unwrap();
        let bits = libc::c_ulong::BITS as usize;
        assert_eq!(mask.len() * bits, (129usize).div_ceil(bits) * bits);
        let set: Vec<usize> = (0..mask.len() * bits)
            .filter(|&c| mask[c / bits] & (1 << (c % bits)) != 0)
            .collect();
        assert_eq!(set, [0, 63, 64, 120, 127]);
        if bits == 64 {
            assert_eq!(mask, [1 | 1 << 63, 1 | 1 << 56 | 1 << 63, 0]);
            // Node 62 alone fits one word with its spare bit; node 63 needs a second.
            assert_eq!(node_mask(&CpuList::from_cpus([62])).unwrap().len(), 1);
            assert_eq!(node_mask(&CpuList::from_cpus([63])).unwrap().len(), 2);
        }
        assert_eq!(node_mask(&CpuList::default()), None);
    }

    /// CPUs past 1,023 on a 4,096-CPU node: the mask grows to the highest CPU, each CPU's bit
    /// where the kernel reads it (word c / 64, bit c % 64 on 64-bit Linux), checked by hand.
    #[test]
    fn masks_past_1024_cpus() {
        let cpus = CpuList::parse("1,1023-1024,4094-4095").unwrap();
        let mask = cpu_mask(&cpus).unwrap();
        let bits = libc::c_ulong::BITS as usize;
        assert_eq!(mask.len(), 4096 / bits);
        let set: Vec<usize> = (0..mask.len() * bits)
            .filter(|&c| mask[c / bits] & (1 << (c % bits)) != 0)
            .collect();
        assert_eq!(set, [1, 1023, 1024, 4094, 4095]);
        if bits == 64 {
            assert_eq!(mask[0], 0b10);
            assert_eq!(mask[15], 1 << 63);
            assert_eq!(mask[16], 1);
            assert_eq!(mask[63], 0b11 << 62);
        }
        assert!(cpu_mask(&CpuList::from_cpus(Vec::<u32>::new())).is_none());
        assert!(set_affinity(&CpuList::from_cpus(Vec::<u32>::new())).is_err());
    }
}
