//! The `--lama-*` options as written, parsed as the plugin parses them (lama map's and lama
//! exec's): a familiar Slurm or Open MPI spelling is refused with its LAMA equivalent.

use crate::Failure;
use lama_engine::{Bind, Layout, Membind, Mppr, Order};

/// The layout, binding (none: the default), MPPR, order and memory binding asked for.
pub(crate) struct Asked {
    pub(crate) layout: Layout,
    pub(crate) bind: Option<Bind>,
    pub(crate) mppr: Mppr,
    pub(crate) order: Order,
    pub(crate) membind: Membind,
}

impl Asked {
    pub(crate) fn parse(
        map: &str,
        bind: Option<&str>,
        mppr: Option<&str>,
        order: &str,
        membind: &str,
    ) -> Result<Asked, Failure> {
        let syntax = |d: lama_engine::Diagnostic| {
            Failure::Usage(lama_slurm::familiar::explain(d).to_string())
        };
        Ok(Asked {
            layout: Layout::parse(map).map_err(syntax)?,
            bind: bind.map(Bind::parse).transpose().map_err(syntax)?,
            mppr: match mppr {
                Some(m) => Mppr::parse(m).map_err(syntax)?,
                None => Mppr::none(),
            },
            order: Order::parse(order).map_err(syntax)?,
            membind: Membind::parse(membind).map_err(syntax)?,
        })
    }
}
