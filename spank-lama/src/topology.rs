//! The node's topology: cached by slurmd when it starts, read by each step from the first
//! usable source ([`crate::topo_source`]).

use crate::config::SiteConfig;
use crate::topo_source;

/// This node's topology from the first usable source that has every level of `needs` (the
/// step's layout, binding and MPPR levels, [`topo_source::needed_levels`]; none for a plan)
/// and, with `gpus`, GPUs,
/// with the time it took in microseconds; each source skipped is logged with its reason.
pub fn for_step(
    site: &SiteConfig,
    node: &str,
    needs: &[lama_engine::Level],
    gpus: bool,
) -> Result<(topo_source::Resolved, u128), String> {
    let start = std::time::Instant::now();
    let now = topo_source::NodeNow::read()?;
    let resolved = topo_source::node_topology_live(site, node, &now, needs, gpus)
        .map_err(|e| format!("cannot get this node's topology: {e}"))?;
    for skipped in &resolved.skipped {
        tracing::info!(node, "lama: topology source skipped: {skipped}");
    }
    Ok((resolved, start.elapsed().as_micros()))
}

/// slurmd is starting: cache the node's topology for the steps (`topology_cache=`). A failure
/// is logged and slurmd starts anyway; steps then use the next source.
pub fn cache(site: &SiteConfig, node: &str) {
    let path = match site.topology_cache_path() {
        Ok(Some(path)) => path,
        Ok(None) => {
            tracing::info!(node, "lama: topology_cache=none: no topology cached");
            return;
        }
        Err(why) => {
            tracing::warn!(
                node,
                "lama: topology not cached: {why}; name the file with topology_cache= on the \
                 plugin's plugstack.conf line"
            );
            return;
        }
    };
    // Root slurmd runs no GPU vendor's library for it (lama_hwloc::Io::Kernel): steps place
    // by the GPUs' PCI addresses, which the kernel gives.
    let export = || lama_hwloc::export_xml_with(&lama_hwloc::Source::Live, lama_hwloc::Io::Kernel);
    match crate::topo_cache::export(&path, export) {
        Ok(done) => tracing::info!(
            node,
            "lama: topology cached in {} ({} bytes, {} ms)",
            path.display(),
            done.bytes,
            done.millis
        ),
        Err(e) => tracing::warn!(
            node,
            "lama: topology not cached ({e}); steps use the next topology source"
        ),
    }
}

/// The node's short host name (`%h`; `%n` and messages where Slurm gives no `NodeName`). Not taken from the job's environment, which
/// the user controls.
pub fn short_host_name() -> String {
    crate::bounded::read_file(
        std::path::Path::new("/proc/sys/kernel/hostname"),
        crate::bounded::MAX_SMALL_FILE,
    )
    .ok()
    .and_then(|h| h.trim().split('.').next().map(str::to_string))
    .unwrap_or_else(|| "node".to_string())
}
