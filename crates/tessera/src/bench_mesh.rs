//! `tessera bench mesh` (filled in by the mesh operations work).

use clap::Args;

#[derive(Args, Debug)]
pub struct BenchMeshArgs {}

pub fn run(_a: BenchMeshArgs) -> anyhow::Result<()> {
    anyhow::bail!("bench mesh is being built")
}
