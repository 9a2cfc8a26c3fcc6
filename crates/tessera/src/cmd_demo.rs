//! `tessera demo`: the main job (filled in by the mesh IO/CLI work).

use clap::Args;

#[derive(Args, Debug)]
pub struct DemoArgs {}

pub fn run(_a: DemoArgs) -> anyhow::Result<()> {
    anyhow::bail!("demo is being built")
}
