//! `tessera mesh ...` (filled in by the mesh IO/CLI work).

use clap::{Args, Subcommand};

#[derive(Args, Debug)]
pub struct MeshArgs {
    #[command(subcommand)]
    cmd: MeshCmd,
}

#[derive(Subcommand, Debug)]
enum MeshCmd {}

pub fn run(a: MeshArgs) -> anyhow::Result<()> {
    match a.cmd {}
}
