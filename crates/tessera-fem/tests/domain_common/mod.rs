//! Generated meshes, the stiffness operator, the global assembly and a domain layout shared by
//! tests/domain.rs and tests/domain_gpu.rs.
#![allow(dead_code)]

use tessera_core::Par;
use tessera_fem::assemble::{Assembler, Operator, Summation};
use tessera_fem::domain::DomainLayout;
use tessera_fem::material::Material;
use tessera_fem::nodes::HoMesh;
use tessera_mesh::generate::{box_mesh, BoxKind};
use tessera_mesh::partition::{partition_cells, PartitionParams, Partitioner};
use tessera_mesh::simplex::SimplexMesh;
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
