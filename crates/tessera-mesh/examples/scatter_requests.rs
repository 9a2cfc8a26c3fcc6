//! The memory requests of the GPU transposes' scattered phases (dissertation §3.4.1,
//! Listing 3.1), counted on the host for a mesh in file order and in Morton order: the model
//! behind the floors of δ3, δ2 and δ1 in `crates/tessera-mesh/src/cuda/NOTES.md` (session 15).
//!
//! A warp's store or atomic instruction becomes one L2 request per distinct 32-byte sector its
//! 32 lanes touch. δ3's two-slot scatter (`transpose_coop`, `two_slot`) stores cell indices
//! at byte `8 f + 4 s` (face f, sign s), 32 consecutive ∂3 entries per instruction; the lines
//! "group G" count the requests if every G consecutive entries were first sorted by address
//! (a warp or block reordering its entries before storing). δ2's and δ1's count phases add 1
//! to a 4-byte counter per ∂2 / ∂1 entry.
//!
//! ```text
//! cargo run --release -p tessera-mesh --example scatter_requests -- MESH
//! ```
use tessera_mesh::simplex::SimplexMesh;

/// Requests of stores at byte addresses `addr`, 32 per instruction in order, after sorting
/// every `group` consecutive addresses (`group` 32: as they come).
fn requests(addr: &[u64], group: usize) -> usize {
    let mut total = 0;
    let mut sectors: Vec<u64> = Vec::new();
    for g in addr.chunks(group) {
        sectors.clear();
        sectors.extend(g.iter().map(|a| a >> 5));
        if group > 32 {
            sectors.sort_unstable();
        }
        for ins in sectors.chunks_mut(32) {
            ins.sort_unstable();
            total += 1 + ins.windows(2).filter(|w| w[0] != w[1]).count();
        }
    }
    total
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: scatter_requests MESH");
        std::process::exit(2);
    };
    let mut mesh = tessera_mesh::io::read_mesh(std::path::Path::new(&path))?.mesh;
    for order in ["file", "Morton"] {
        if order == "Morton" {
            mesh = SimplexMesh::morton_ordered(&mesh)?;
        }
        let slots: Vec<u64> = mesh
            .cell_faces()
            .columns()
            .iter()
            .map(|&v| {
                let (f, sign) = tessera_sparse::decode(v);
                8 * f as u64 + if sign < 0 { 4 } else { 0 }
            })
            .collect();
        let d2: Vec<u64> = mesh
            .face_edges()
            .columns()
            .iter()
            .map(|&v| 4 * tessera_sparse::decode(v).0 as u64)
            .collect();
        let d1: Vec<u64> = mesh
            .edge_vertices()
            .iter()
            .flat_map(|e| [4 * e[0] as u64, 4 * e[1] as u64])
            .collect();
        println!("{order} order:");
        for g in [32usize, 128, 1024, 4096] {
            println!(
                "  δ3 scatter, {} entries, group {g:4}: {} requests",
                slots.len(),
                requests(&slots, g)
            );
        }
        println!(
            "  δ2 count, {} entries: {} requests",
            d2.len(),
            requests(&d2, 32)
        );
        println!(
            "  δ1 count, {} entries: {} requests",
            d1.len(),
            requests(&d1, 32)
        );
    }
    Ok(())
}
