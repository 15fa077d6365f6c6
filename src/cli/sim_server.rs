//! `sweeptop sim-server [...]`: the simulated inference server, embedded so the
//! demo and the tests need nothing but this binary.

use super::{Context, Result};

pub fn sim_server(args: sweeptop_sim::SimArgs) -> Result<u8> {
    let rt = super::runtime(2)?;
    rt.block_on(sweeptop_sim::serve(args))
        .context(|| "simulated server".into())?;
    Ok(0)
}
