//! Generated meshes, the stiffness operator, the global assembly, a domain layout, the beam
//! problem and the relative difference shared by tests/domain.rs and tests/domain_gpu.rs.
#![allow(dead_code)]

use tessera_core::Par;
use tessera_fem::assemble::{Assembler, Operator, Summation};
use tessera_fem::domain::DomainLayout;
use tessera_fem::material::Material;
use tessera_fem::nodes::HoMesh;
use tessera_mesh::generate::{box_mesh, BoxKind};
use tessera_mesh::partition::{partition_cells, PartitionParams, Partitioner};
use tessera_mesh::simplex::SimplexMesh;
use tessera_solve::Constraints;
use tessera_sparse::binbcsr::BinBcsr;

pub fn tets(n: [usize; 3]) -> SimplexMesh {
    SimplexMesh::from_poly(&box_mesh(
        BoxKind::Tet,
        n,
        [n[0] as f64, n[1] as f64, n[2] as f64],
    ))
    .unwrap()
}

pub fn stiffness_op() -> Operator {
    Operator::Stiffness(Material::new(200e3, 0.3, 7.8e-9).lame().unwrap())
}

pub fn global(ho: &HoMesh) -> BinBcsr<f64> {
    let mut asm = Assembler::new(ho, Summation::PerNode, Par::Rayon).unwrap();
    asm.assemble::<f64>(stiffness_op()).unwrap()
}

pub fn layout(ho: &HoMesh, k: usize, partitioner: Partitioner) -> DomainLayout {
    let part = partition_cells(
        ho.mesh(),
        &PartitionParams {
            domains: k,
            order: ho.order(),
            partitioner,
        },
    )
    .unwrap();
    DomainLayout::new(ho, &part).unwrap()
}

/// A beam fixed at x = 0 with a downward force on the nodes at x = L.
pub fn beam_system(ho: &HoMesh) -> (Constraints, Vec<f64>) {
    let pos = ho.node_positions();
    let n = ho.num_nodes();
    let l = pos.iter().fold(0.0f64, |m, p| m.max(p[0]));
    let mut cons = Constraints::none(3 * n);
    let mut f = vec![0.0; 3 * n];
    for (i, q) in pos.iter().enumerate() {
        if q[0] < 1e-9 {
            for c in 0..3 {
                cons.fix(i, 3, c, 0.0);
            }
        }
        if q[0] > l - 1e-9 {
            f[3 * i + 2] = -1.0;
        }
    }
    (cons, f)
}

/// The constraints of the global problem in the layout's concatenated owned order.
pub fn scatter_constraints(lay: &DomainLayout, cons: &Constraints) -> Constraints {
    Constraints {
        fixed: lay.scatter(&cons.fixed, 3),
        values: lay.scatter(&cons.values, 3),
    }
}

/// `|a - b| / |b|` in the 2-norm.
pub fn rel_diff(a: &[f64], b: &[f64]) -> f64 {
    let d = a
        .iter()
        .zip(b)
        .map(|(x, y)| (x - y) * (x - y))
        .sum::<f64>()
        .sqrt();
    let n = b.iter().map(|v| v * v).sum::<f64>().sqrt();
    d / n
}
