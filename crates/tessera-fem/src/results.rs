//! Post-processing of a static solution (issue 6): displacement, strain, Cauchy stress and
//! von Mises stress per node and per cell, and the JSON summary.
//!
//! The solution holds Bernstein-Bézier coefficients ([`crate::loads`]). **Per-node values are
//! nodal (Lagrange) values**: at every node of a cell (barycentric position `α / p`) the BB
//! polynomial is evaluated, `u(α/p) = Σ_β c_β B_β(α/p)`, so that the equispaced points of a
//! VTK higher-order cell carry the true field and ParaView interpolates the curved field.
//! The displacement is continuous, so every cell gives the same nodal value; strain and
//! stress are discontinuous across faces and are averaged over the cells of a node.
//! **Per-cell values** are evaluated at the cell's centroid.
//!
//! Stress (Eq. 4.7): `σ = 2 μ ε + λ tr(ε) I`; von Mises
//! `σ_v = sqrt(½((σxx−σyy)² + (σyy−σzz)² + (σzz−σxx)²) + 3(σxy² + σyz² + σxz²))`.
//! Symmetric tensors are stored as 6 components in VTK order `xx, yy, zz, xy, yz, xz`.

use crate::element::CellGeometry;
use crate::error::FemError;
use crate::loads::{cell_geometry, Bernstein};
use crate::material::Lame;
use crate::nodes::HoMesh;

/// Results per node and per cell.
#[derive(Clone, Debug, Default)]
pub struct Results {
    /// Nodal displacement (Lagrange values), per global node.
    pub displacement: Vec<[f64; 3]>,
    /// Averaged nodal strain and stress (`xx, yy, zz, xy, yz, xz`) and von Mises stress.
    pub strain: Vec<[f64; 6]>,
    pub stress: Vec<[f64; 6]>,
    pub von_mises: Vec<f64>,
    /// Strain, stress and von Mises stress at each cell's centroid.
    pub cell_strain: Vec<[f64; 6]>,
    pub cell_stress: Vec<[f64; 6]>,
    pub cell_von_mises: Vec<f64>,
}

impl Results {
    /// Largest displacement magnitude over the nodes.
    pub fn max_displacement(&self) -> f64 {
        self.displacement
            .iter()
            .map(|u| (u[0] * u[0] + u[1] * u[1] + u[2] * u[2]).sqrt())
            .fold(0.0, f64::max)
    }
    /// Largest (node-averaged) von Mises stress.
    pub fn max_von_mises(&self) -> f64 {
        self.von_mises.iter().copied().fold(0.0, f64::max)
    }
}

/// Symmetric strain from a displacement gradient `g[k][j] = ∂u_k/∂x_j`.
pub fn strain_of(g: &[[f64; 3]; 3]) -> [f64; 6] {
    [
        g[0][0],
        g[1][1],
        g[2][2],
        0.5 * (g[0][1] + g[1][0]),
        0.5 * (g[1][2] + g[2][1]),
        0.5 * (g[0][2] + g[2][0]),
    ]
}

/// Cauchy stress of Eq. 4.7 from a strain.
pub fn stress_of(e: &[f64; 6], l: Lame) -> [f64; 6] {
    let tr = e[0] + e[1] + e[2];
    let m2 = 2.0 * l.mu;
    [
        m2 * e[0] + l.lambda * tr,
        m2 * e[1] + l.lambda * tr,
        m2 * e[2] + l.lambda * tr,
        m2 * e[3],
        m2 * e[4],
        m2 * e[5],
    ]
}

/// Von Mises equivalent stress.
pub fn von_mises(s: &[f64; 6]) -> f64 {
    (0.5 * ((s[0] - s[1]).powi(2) + (s[1] - s[2]).powi(2) + (s[2] - s[0]).powi(2))
        + 3.0 * (s[3] * s[3] + s[4] * s[4] + s[5] * s[5]))
        .sqrt()
}

/// Evaluates a BB displacement field on cells.
pub struct FieldEvaluator<'a> {
    ho: &'a HoMesh,
    u: &'a [f64],
    basis: Bernstein,
    vals: Vec<f64>,
    dxi: Vec<f64>,
    nodes: Vec<u32>,
}

impl<'a> FieldEvaluator<'a> {
    /// An evaluator for the coefficients `u` (3 per node) on `ho` (tetrahedra).
    pub fn new(ho: &'a HoMesh, u: &'a [f64]) -> Self {
        let basis = Bernstein::new(3, ho.order());
        let m = basis.len();
        FieldEvaluator {
            ho,
            u,
            basis,
            vals: vec![0.0; m],
            dxi: vec![0.0; 4 * m],
            nodes: vec![0; m],
        }
    }
    /// The cell's geometry (to pass to [`Self::eval`]).
    pub fn geometry(&self, c: usize) -> Result<CellGeometry, FemError> {
        cell_geometry(self.ho, c)
    }
    /// Displacement and its gradient at barycentric point `xi` of cell `c`.
    pub fn eval(&mut self, c: usize, g: &CellGeometry, xi: &[f64; 4]) -> ([f64; 3], [[f64; 3]; 3]) {
        self.ho.cell_nodes(c, &mut self.nodes);
        self.basis.values(xi, &mut self.vals);
        self.basis.dxi(xi, &mut self.dxi);
        let mut u = [0.0; 3];
        let mut grad = [[0.0; 3]; 3];
        for (a, &n) in self.nodes.iter().enumerate() {
            let cu = &self.u[n as usize * 3..n as usize * 3 + 3];
            // ∇B_a = Σ_i ∂B_a/∂ξ_i ∇ξ_i
            let mut gb = [0.0; 3];
            for i in 0..4 {
                let d = self.dxi[a * 4 + i];
                if d != 0.0 {
                    for j in 0..3 {
                        gb[j] += d * g.grads[i][j];
                    }
                }
            }
            for k in 0..3 {
                u[k] += self.vals[a] * cu[k];
                for j in 0..3 {
                    grad[k][j] += cu[k] * gb[j];
                }
            }
        }
        (u, grad)
    }
}

/// Compute nodal and cell results from BB coefficients `u` (3 per node).
pub fn compute_results(ho: &HoMesh, u: &[f64], lame: Lame) -> Result<Results, FemError> {
    let nn = ho.num_nodes();
    let nc = ho.num_cells();
    let p = ho.order();
    let alphas = crate::multi_index::multi_indices(3, p);
    let mut ev = FieldEvaluator::new(ho, u);
    let mut disp = vec![[0.0; 3]; nn];
    let mut strain = vec![[0.0; 6]; nn];
    let mut count = vec![0u32; nn];
    let mut cell_strain = Vec::with_capacity(nc);
    let mut cn = vec![0u32; ho.nodes_per_cell()];
    for c in 0..nc {
        let g = ev.geometry(c)?;
        ho.cell_nodes(c, &mut cn);
        for (a, al) in alphas.iter().enumerate() {
            let xi = [
                al[0] as f64 / p as f64,
                al[1] as f64 / p as f64,
                al[2] as f64 / p as f64,
                al[3] as f64 / p as f64,
            ];
            let (uv, gr) = ev.eval(c, &g, &xi);
            let n = cn[a] as usize;
            disp[n] = uv;
            let e = strain_of(&gr);
            for k in 0..6 {
                strain[n][k] += e[k];
            }
            count[n] += 1;
        }
        let (_, gr) = ev.eval(c, &g, &[0.25; 4]);
        cell_strain.push(strain_of(&gr));
    }
    for (s, &k) in strain.iter_mut().zip(&count) {
        if k > 0 {
            for v in s.iter_mut() {
                *v /= k as f64;
            }
        }
    }
    let stress: Vec<[f64; 6]> = strain.iter().map(|e| stress_of(e, lame)).collect();
    let vm = stress.iter().map(von_mises).collect();
    let cell_stress: Vec<[f64; 6]> = cell_strain.iter().map(|e| stress_of(e, lame)).collect();
    let cell_vm = cell_stress.iter().map(von_mises).collect();
    Ok(Results {
        displacement: disp,
        strain,
        stress,
        von_mises: vm,
        cell_strain,
        cell_stress,
        cell_von_mises: cell_vm,
    })
}

/// The JSON summary of a static solve.
pub fn summary_json(
    title: &str,
    ho: &HoMesh,
    dofs: usize,
    nonzeros: u64,
    stages_ms: &[(String, f64)],
    report: &tessera_solve::SolveReport,
    results: &Results,
    extra: serde_json::Value,
) -> serde_json::Value {
    let mut j = serde_json::json!({
        "title": title,
        "order": ho.order(),
        "vertices": ho.mesh().num_vertices(),
        "cells": ho.num_cells(),
        "nodes": ho.num_nodes(),
        "dofs": dofs,
        "nonzeros": nonzeros,
        "stages_ms": stages_ms.iter().map(|(k, v)| (k.clone(), serde_json::json!(v))).collect::<serde_json::Map<String, serde_json::Value>>(),
        // the same times in the order the stages ran (a JSON object's keys have no order)
        "stages": stages_ms.iter().map(|(k, v)| serde_json::json!({"stage": k, "ms": v})).collect::<Vec<_>>(),
        "iterations": report.iterations,
        "final_residual": report.final_residual,
        "max_displacement": results.max_displacement(),
        "max_von_mises": results.max_von_mises(),
        "dof_basis": "Bernstein-Bezier coefficients (nodal values written to .vtu)",
    });
    if let (Some(o), serde_json::Value::Object(e)) = (j.as_object_mut(), extra) {
        o.extend(e);
    }
    j
}
