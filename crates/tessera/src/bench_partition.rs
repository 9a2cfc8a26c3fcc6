//! `tessera bench partition MESHES [--domains 2,4,...] [--orders 1,2,3] [--partitioners metis,rcb]`:
//! partition quality for domain decomposition (dissertation §7.1.2): edge cut, owned-DOF
//! imbalance (target <= 5 %) and halo DOFs per domain for each mesh, domain count, element
//! order and partitioner. The measuring code is `tessera_mesh::partition::sweep`.

use crate::util::spinner;
use clap::Args;
use tessera_mesh::partition::{sweep, sweep_markdown, Partitioner};

#[derive(Args, Debug)]
pub struct BenchPartitionArgs {
    /// Meshes (files, or gen:bracket:N / gen:box:N).
    #[arg(required = true)]
    pub meshes: Vec<String>,
    /// Domain counts.
    #[arg(long, value_delimiter = ',', default_value = "2,4,8,16,32,64")]
    pub domains: Vec<usize>,
    /// Element orders whose nodes are balanced and counted.
    #[arg(long, value_delimiter = ',', default_value = "1,2,3")]
    pub orders: Vec<usize>,
    /// Partitioners.
    #[arg(long, value_delimiter = ',', default_value = "metis,rcb")]
    pub partitioners: Vec<Partitioner>,
    /// One JSON object per row (JSON lines) instead of the table.
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: BenchPartitionArgs) -> anyhow::Result<()> {
    let mut all = Vec::new();
    for spec in &a.meshes {
        let mesh = crate::cmd_fem::load_simplex_mesh(spec)?;
        let name = std::path::Path::new(spec)
            .file_name()
            .map_or(spec.clone(), |f| f.to_string_lossy().into_owned());
        let pb = (!a.json).then(|| spinner(&format!("partitioning {name}")));
        let rows = sweep(
            &mesh,
            &name,
            &a.partitioners,
            &a.domains,
            &a.orders,
            &mut |r| {
                if a.json {
                    println!("{}", serde_json::to_string(r).unwrap_or_default());
                } else if let Some(pb) = &pb {
                    pb.set_message(format!(
                        "{name}: {} k = {} p = {}: imbalance {:.2} %",
                        r.partitioner,
                        r.domains,
                        r.order,
                        100.0 * r.imbalance
                    ));
                }
            },
        );
        if let Some(pb) = pb {
            pb.finish_and_clear();
        }
        all.extend(rows?);
    }
    if !a.json {
        print!("{}", sweep_markdown(&all));
        let worst = all.iter().map(|r| r.imbalance).fold(0.0f64, f64::max);
        println!(
            "\nlargest imbalance {:.2} % (target <= 5 %); halo DOFs are the values one exchange receives per domain",
            100.0 * worst
        );
    }
    Ok(())
}
