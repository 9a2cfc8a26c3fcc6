//! `tessera mesh partition`: split a mesh's cells into domains and report the quality of the
//! split (dissertation §7.1.2; [`tessera_mesh::partition`]).

use crate::util::spinner;
use clap::Args;
use serde::Serialize;
use std::time::Instant;
use tessera_core::table::Table;
use tessera_mesh::partition::{partition_cells, PartitionParams, PartitionReport, Partitioner};

#[derive(Args, Debug)]
pub struct PartitionArgs {
    /// Mesh file (tetrahedra or triangles), or gen:bracket:N / gen:box:N.
    mesh: String,
    /// Number of domains.
    #[arg(long, short = 'k')]
    domains: usize,
    /// Element order whose nodes are balanced and counted (owned and halo nodes).
    #[arg(long, short = 'p', default_value_t = 1)]
    order: usize,
    /// metis (multilevel k-way on the dual graph) or rcb (recursive coordinate bisection).
    #[arg(long, default_value = "metis")]
    partitioner: Partitioner,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct Out<'a> {
    mesh: &'a str,
    partition_ms: f64,
    dofs_per_node: usize,
    #[serde(flatten)]
    report: &'a PartitionReport,
}

pub fn partition(a: PartitionArgs) -> anyhow::Result<()> {
    let mesh = crate::cmd_fem::load_simplex_mesh(&a.mesh)?;
    let params = PartitionParams {
        domains: a.domains,
        order: a.order,
        partitioner: a.partitioner,
    };
    let pb = spinner(&format!(
        "partitioning {} cells into {} domains ({})",
        mesh.num_cells(),
        a.domains,
        a.partitioner
    ));
    let t = Instant::now();
    let part = partition_cells(&mesh, &params);
    let partition_ms = t.elapsed().as_secs_f64() * 1e3;
    let part = match part {
        Ok(p) => p,
        Err(e) => {
            pb.finish_and_clear();
            return Err(e.into());
        }
    };
    let report = part.report(&mesh, a.order);
    pb.finish_and_clear();
    let e = mesh.dim();
    if a.json {
        let out = Out {
            mesh: &a.mesh,
            partition_ms,
            dofs_per_node: e,
            report: &report,
        };
        println!("{}", serde_json::to_string(&out)?);
        return Ok(());
    }
    print!("{}", format_report(&a.mesh, &report, partition_ms, e));
    Ok(())
}

/// The text report: a summary, then one row per domain.
pub fn format_report(mesh: &str, r: &PartitionReport, ms: f64, e: usize) -> String {
    let mut s = format!(
        "{mesh}: {} cells into {} domains ({}, {ms:.0} ms)\n  order p = {}: {} nodes, {} DOFs\n  edge cut      {} facets\n  imbalance     {:.2} % (max owned DOFs / mean - 1)\n  halo nodes    {} in all, {} at most per domain\n\n",
        r.cells,
        r.domains,
        r.partitioner,
        r.order,
        r.nodes,
        r.nodes * e as u64,
        r.edge_cut,
        100.0 * r.imbalance,
        r.total_halo(),
        r.max_halo(),
    );
    let mut t = Table::new(&[
        "domain",
        "cells",
        "local cells",
        "owned nodes",
        "owned DOFs",
        "halo nodes",
    ]);
    for d in 0..r.domains {
        t.row(vec![
            d.to_string(),
            r.cells_per_domain[d].to_string(),
            r.local_cells[d].to_string(),
            r.owned_nodes[d].to_string(),
            (r.owned_nodes[d] * e as u64).to_string(),
            r.halo_nodes[d].to_string(),
        ])
        .expect("six columns");
    }
    s.push_str(&t.markdown());
    s
}
