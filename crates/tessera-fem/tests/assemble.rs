//! Assembly into Bin-BCSR* (dissertation §4.4.3-4.4.4) on generated triangle and tetrahedral
//! meshes, p = 1..3: exact allocation, symmetry, rigid modes and definiteness, the patch test,
//! invariance to cell-vertex order, agreement of the three summations, Seq == Rayon, mass.

use tessera_core::{DeviceChoice, Par};
use tessera_fem::assemble::{
    assemble_mass, assemble_stiffness, AssembleOptions, Assembler, Assembly, Operator, Summation,
};
use tessera_fem::material::Material;
use tessera_fem::nodes::HoMesh;
use tessera_fem::pattern::{brute_force_counts, zayer_bound};
use tessera_mesh::simplex::SimplexMesh;
use tessera_sparse::binbcsr::BinBcsr;

struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 11
    }
    fn f(&mut self) -> f64 {
        (self.next() as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
    }
}

/// A jittered grid of `n` cubes split into 6 Kuhn tetrahedra each (positive volume).
fn tet_grid(n: [usize; 3], seed: u64) -> SimplexMesh {
    let mut g = Lcg(seed);
    let vid = |i: usize, j: usize, k: usize| (i + (n[0] + 1) * (j + (n[1] + 1) * k)) as u32;
    let mut pos = Vec::new();
    for k in 0..=n[2] {
        for j in 0..=n[1] {
            for i in 0..=n[0] {
                let interior = [i > 0 && i < n[0], j > 0 && j < n[1], k > 0 && k < n[2]];
                let mut p = [i as f64, j as f64, k as f64 * 1.5];
                for a in 0..3 {
                    if interior[a] {
                        p[a] += 0.15 * g.f();
                    }
                }
                pos.push(p);
            }
        }
    }
    let mut cells = Vec::new();
    let perms = [
        [0, 1, 2],
        [0, 2, 1],
        [1, 0, 2],
        [1, 2, 0],
        [2, 0, 1],
        [2, 1, 0],
    ];
    for k in 0..n[2] {
        for j in 0..n[1] {
            for i in 0..n[0] {
                for perm in perms {
                    let mut c = [i, j, k];
                    let mut tet = vec![vid(c[0], c[1], c[2])];
                    for &ax in &perm {
                        c[ax] += 1;
                        tet.push(vid(c[0], c[1], c[2]));
                    }
                    // orient positively
                    let p: Vec<[f64; 3]> = tet.iter().map(|&v| pos[v as usize]).collect();
                    let d = |a: usize| [p[a][0] - p[0][0], p[a][1] - p[0][1], p[a][2] - p[0][2]];
                    let (a, b, cc) = (d(1), d(2), d(3));
                    let det = a[0] * (b[1] * cc[2] - b[2] * cc[1])
                        - a[1] * (b[0] * cc[2] - b[2] * cc[0])
                        + a[2] * (b[0] * cc[1] - b[1] * cc[0]);
                    if det < 0.0 {
                        tet.swap(2, 3);
                    }
                    cells.extend(tet);
                }
            }
        }
    }
    SimplexMesh::new(3, cells, pos).unwrap()
}

/// A jittered grid of `n` squares split into 2 triangles each.
fn tri_grid(n: [usize; 2], seed: u64) -> SimplexMesh {
    let mut g = Lcg(seed);
    let vid = |i: usize, j: usize| (i + (n[0] + 1) * j) as u32;
    let mut pos = Vec::new();
    for j in 0..=n[1] {
        for i in 0..=n[0] {
            let mut p = [i as f64, j as f64 * 0.8, 0.0];
            if i > 0 && i < n[0] && j > 0 && j < n[1] {
                p[0] += 0.2 * g.f();
                p[1] += 0.2 * g.f();
            }
            pos.push(p);
        }
    }
    let mut cells = Vec::new();
    for j in 0..n[1] {
        for i in 0..n[0] {
            cells.extend([vid(i, j), vid(i + 1, j), vid(i + 1, j + 1)]);
            cells.extend([vid(i, j), vid(i + 1, j + 1), vid(i, j + 1)]);
        }
    }
    SimplexMesh::new(2, cells, pos).unwrap()
}

fn material() -> Material {
    Material::new(200.0, 0.3, 7.5)
}

fn opts(summation: Summation, par: Par) -> AssembleOptions {
    AssembleOptions {
        summation,
        par,
        device: DeviceChoice::Cpu,
    }
}

fn dense(m: &BinBcsr<f64>) -> (usize, Vec<f64>) {
    let csr = m.to_csr();
    let n = csr.nrows;
    let mut a = vec![0.0; n * n];
    for r in 0..n {
        for k in csr.row_ptr[r] as usize..csr.row_ptr[r + 1] as usize {
            a[r * n + csr.col_idx[k] as usize] = csr.values[k];
        }
    }
    (n, a)
}

fn matvec(n: usize, a: &[f64], x: &[f64]) -> Vec<f64> {
    (0..n)
        .map(|i| (0..n).map(|j| a[i * n + j] * x[j]).sum())
        .collect()
}

/// Rigid modes at the node positions: `d` translations and `d(d-1)/2` rotations.
fn rigid_modes(d: usize, x: &[[f64; 3]]) -> Vec<Vec<f64>> {
    let n = x.len() * d;
    let mut modes: Vec<Vec<f64>> = (0..d)
        .map(|c| (0..n).map(|r| if r % d == c { 1.0 } else { 0.0 }).collect())
        .collect();
    let rots: &[(usize, usize)] = if d == 3 {
        &[(0, 1), (1, 2), (2, 0)]
    } else {
        &[(0, 1)]
    };
    for &(a, b) in rots {
        let mut r = vec![0.0; n];
        for (node, xn) in x.iter().enumerate() {
            r[node * d + a] = -xn[b];
            r[node * d + b] = xn[a];
        }
        modes.push(r);
    }
    modes
}

/// Dense Cholesky; returns the smallest pivot (negative or zero if not positive definite).
fn cholesky_min_pivot(n: usize, a: &mut [f64]) -> f64 {
    let mut minp = f64::INFINITY;
    for j in 0..n {
        let mut s = a[j * n + j];
        for k in 0..j {
            s -= a[j * n + k] * a[j * n + k];
        }
        minp = minp.min(s);
        if s <= 0.0 {
            return s;
        }
        let l = s.sqrt();
        a[j * n + j] = l;
        for i in j + 1..n {
            let mut t = a[i * n + j];
            for k in 0..j {
                t -= a[i * n + k] * a[j * n + k];
            }
            a[i * n + j] = t / l;
        }
    }
    minp
}

fn ho(mesh: SimplexMesh, p: usize) -> HoMesh {
    HoMesh::new(mesh, p).unwrap()
}

fn meshes() -> Vec<(usize, SimplexMesh)> {
    vec![(3, tet_grid([2, 2, 2], 1)), (2, tri_grid([4, 3], 2))]
}

#[test]
fn exact_allocation_only_bin_padding() {
    for (_d, mesh) in meshes() {
        for p in 1..=3 {
            let h = ho(mesh.clone(), p);
            let a: Assembly<f64> =
                assemble_stiffness(&h, &material(), &opts(Summation::PerNode, Par::Rayon)).unwrap();
            let pat = a.matrix.pattern();
            pat.validate().unwrap();
            let counts = brute_force_counts(&h, Par::Seq).unwrap();
            for (i, &c) in counts.iter().enumerate() {
                assert_eq!(pat.row_lengths()[i] + 1, c, "row {i}");
            }
            // the columns equal the brute-force set of nodes sharing a cell (diagonal excluded)
            let nc = h.node_cells();
            let mut buf = vec![0u32; h.nodes_per_cell()];
            for i in 0..h.num_nodes() {
                let mut all = Vec::new();
                for &c in nc.row(i as u32) {
                    h.cell_nodes(c as usize, &mut buf);
                    all.extend(buf.iter().copied().filter(|&j| j as usize != i));
                }
                all.sort_unstable();
                all.dedup();
                assert_eq!(pat.row_cols(i).collect::<Vec<_>>(), all, "row {i} columns");
            }
            if p == 3 && h.dim() == 3 {
                // the sorted insertion leaves the 63-slot local buffer for some rows
                assert!(pat.row_lengths().iter().any(|&l| l > 63));
            }
            let exact: u64 = counts.iter().map(|&c| c as u64).sum();
            assert_eq!(a.stats.block_nonzeros, exact);
            // allocated blocks = off-diagonal slots + diagonal blocks = exact + bin padding
            assert_eq!(
                pat.num_slots() as u64 + pat.num_block_rows() as u64,
                exact + a.stats.padding_blocks
            );
            let e = h.dim();
            assert_eq!(a.matrix.values().len(), pat.num_slots() * e * e);
            assert_eq!(a.matrix.diag().len(), pat.num_block_rows() * e * e);
            // bin padding is at most (bin width - row length) per row
            let widths: u64 = (0..pat.num_bins())
                .map(|b| pat.bin_width(b) as u64 * 32)
                .sum();
            assert_eq!(widths, pat.num_slots() as u64);
            assert_eq!(a.stats.zayer_bound, zayer_bound(&h));
            assert!(a.stats.zayer_bound >= exact);
            assert_eq!(a.stats.dofs, (h.num_nodes() * e) as u64);
            for k in [
                "count_contributions",
                "bin_offsets",
                "alloc_final",
                "column_indices",
                "element_matrices",
                "summation",
                "total",
            ] {
                assert!(a.stats.stages_ms.contains_key(k), "stage {k}");
            }
        }
    }
}

#[test]
fn summations_agree_and_seq_equals_rayon() {
    for (_d, mesh) in meshes() {
        for p in 1..=3 {
            let h = ho(mesh.clone(), p);
            let reference: Assembly<f64> =
                assemble_stiffness(&h, &material(), &opts(Summation::PerNode, Par::Seq)).unwrap();
            let norm = reference.matrix.frobenius_norm();
            for s in [Summation::PerNode, Summation::Inline, Summation::PerEntry] {
                let seq: Assembly<f64> =
                    assemble_stiffness(&h, &material(), &opts(s, Par::Seq)).unwrap();
                let ray: Assembly<f64> =
                    assemble_stiffness(&h, &material(), &opts(s, Par::Rayon)).unwrap();
                assert_eq!(seq.matrix.pattern(), ray.matrix.pattern());
                assert_eq!(
                    seq.matrix.values(),
                    ray.matrix.values(),
                    "{s:?} p={p}: Seq == Rayon"
                );
                assert_eq!(seq.matrix.diag(), ray.matrix.diag());
                assert_eq!(seq.matrix.pattern(), reference.matrix.pattern());
                for (x, y) in seq
                    .matrix
                    .values()
                    .iter()
                    .zip(reference.matrix.values())
                    .chain(seq.matrix.diag().iter().zip(reference.matrix.diag()))
                {
                    assert!((x - y).abs() <= 1e-12 * norm, "{s:?} p={p}: {x} vs {y}");
                }
            }
            // f32 assembly agrees to single precision
            let f32a: Assembly<f32> =
                assemble_stiffness(&h, &material(), &opts(Summation::PerEntry, Par::Rayon))
                    .unwrap();
            for (x, y) in f32a.matrix.values().iter().zip(reference.matrix.values()) {
                assert!((*x as f64 - y).abs() <= 1e-5 * norm);
            }
            assert!(f32a.stats.bytes_allocated < reference.stats.bytes_allocated);
        }
    }
}

/// The per-node summation (through the position map built with the pattern) and the
/// per-entry summation add the same contributions in the same order, so they agree bit for
/// bit, in f64 and in f32; refilling the values with a reused assembler gives the same matrix.
#[test]
fn per_node_equals_per_entry_exactly_and_refills_reuse_the_map() {
    for (_d, mesh) in meshes() {
        for p in 1..=3 {
            let h = ho(mesh.clone(), p);
            let a: Assembly<f64> =
                assemble_stiffness(&h, &material(), &opts(Summation::PerNode, Par::Rayon)).unwrap();
            let b: Assembly<f64> =
                assemble_stiffness(&h, &material(), &opts(Summation::PerEntry, Par::Seq)).unwrap();
            assert_eq!(a.matrix.values(), b.matrix.values(), "p={p}");
            assert_eq!(a.matrix.diag(), b.matrix.diag(), "p={p}");
            let a: Assembly<f32> =
                assemble_stiffness(&h, &material(), &opts(Summation::PerNode, Par::Seq)).unwrap();
            let b: Assembly<f32> =
                assemble_stiffness(&h, &material(), &opts(Summation::PerEntry, Par::Rayon))
                    .unwrap();
            assert_eq!(a.matrix.values(), b.matrix.values(), "p={p} f32");
            assert_eq!(a.matrix.diag(), b.matrix.diag(), "p={p} f32");
            let mut asm = Assembler::new(&h, Summation::PerNode, Par::Rayon).unwrap();
            let lame = material().lame().unwrap();
            let first: BinBcsr<f32> = asm.assemble(Operator::Stiffness(lame)).unwrap();
            let mass: BinBcsr<f32> = asm.assemble(Operator::Mass(2.0)).unwrap();
            let again: BinBcsr<f32> = asm.assemble(Operator::Stiffness(lame)).unwrap();
            assert_eq!(first.values(), a.matrix.values());
            assert_eq!(again.values(), first.values());
            assert_eq!(again.diag(), first.diag());
            assert!(mass.diag().iter().any(|&x| x > 0.0));
        }
    }
}

#[test]
fn symmetric_rigid_modes_and_positive_definite_complement() {
    for (d, mesh) in meshes() {
        for p in 1..=3 {
            let h = ho(mesh.clone(), p);
            let a: Assembly<f64> =
                assemble_stiffness(&h, &material(), &opts(Summation::PerNode, Par::Rayon)).unwrap();
            let (n, mut k) = dense(&a.matrix);
            for i in 0..n {
                for j in 0..i {
                    assert_eq!(k[i * n + j], k[j * n + i], "exactly symmetric ({i}, {j})");
                }
            }
            let x = h.node_positions();
            let modes = rigid_modes(d, &x);
            assert_eq!(modes.len(), if d == 3 { 6 } else { 3 });
            let scale = a.matrix.frobenius_norm();
            for r in &modes {
                let rn = r.iter().map(|v| v * v).sum::<f64>().sqrt();
                let kr = matvec(n, &k, r);
                let krn = kr.iter().map(|v| v * v).sum::<f64>().sqrt();
                assert!(krn <= 1e-11 * scale * rn, "d={d} p={p}: |K r| = {krn}");
            }
            // K + c R Rᵀ is positive definite iff K is positive definite on the complement of
            // the rigid modes (K is PSD and K R = 0): exactly 6 (3 in 2D) zero eigenvalues.
            let c = scale / n as f64;
            let rn: Vec<f64> = modes
                .iter()
                .map(|r| r.iter().map(|v| v * v).sum::<f64>())
                .collect();
            for (r, nn) in modes.iter().zip(&rn) {
                for i in 0..n {
                    for j in 0..n {
                        k[i * n + j] += c * r[i] * r[j] / nn;
                    }
                }
            }
            let minp = cholesky_min_pivot(n, &mut k);
            assert!(
                minp > 1e-9 * scale,
                "d={d} p={p}: not positive definite on the complement (pivot {minp})"
            );
            // and without the rigid-mode shift the matrix is singular: a zero pivot appears
            let (_, mut k0) = dense(&a.matrix);
            let minp0 = cholesky_min_pivot(n, &mut k0);
            assert!(
                minp0 <= 1e-8 * scale,
                "d={d} p={p}: free body must be singular (pivot {minp0})"
            );
        }
    }
}

/// Outward unit normal times area of boundary facet `verts` of a cell with centroid `cen`.
fn facet_area_normal(d: usize, v: &[[f64; 3]], cen: [f64; 3]) -> [f64; 3] {
    let mut nrm = if d == 3 {
        let a = [v[1][0] - v[0][0], v[1][1] - v[0][1], v[1][2] - v[0][2]];
        let b = [v[2][0] - v[0][0], v[2][1] - v[0][1], v[2][2] - v[0][2]];
        [
            0.5 * (a[1] * b[2] - a[2] * b[1]),
            0.5 * (a[2] * b[0] - a[0] * b[2]),
            0.5 * (a[0] * b[1] - a[1] * b[0]),
        ]
    } else {
        // edge normal (length = edge length)
        [v[1][1] - v[0][1], -(v[1][0] - v[0][0]), 0.0]
    };
    let dir = [v[0][0] - cen[0], v[0][1] - cen[1], v[0][2] - cen[2]];
    if nrm[0] * dir[0] + nrm[1] * dir[1] + nrm[2] * dir[2] < 0.0 {
        nrm = [-nrm[0], -nrm[1], -nrm[2]];
    }
    nrm
}

#[test]
fn patch_test_uniform_stress() {
    let mat = material();
    let lame = mat.lame().unwrap();
    let mut g = Lcg(77);
    for (d, mesh) in meshes() {
        for p in 1..=3 {
            let h = ho(mesh.clone(), p);
            let a: Assembly<f64> =
                assemble_stiffness(&h, &mat, &opts(Summation::PerEntry, Par::Rayon)).unwrap();
            let x = h.node_positions();
            let e = d;
            // u = A x + c, a linear field, is reproduced exactly by the BB basis (control points)
            let am: Vec<f64> = (0..e * e).map(|_| g.f() * 1e-3).collect();
            let c: Vec<f64> = (0..e).map(|_| g.f()).collect();
            let mut u = vec![0.0; x.len() * e];
            for (nd, xn) in x.iter().enumerate() {
                for k in 0..e {
                    u[nd * e + k] = c[k] + (0..e).map(|l| am[k * e + l] * xn[l]).sum::<f64>();
                }
            }
            let mut f = vec![0.0; u.len()];
            a.matrix.spmv(Par::Seq, &u, &mut f).unwrap();
            // uniform stress σ = 2 μ ε + λ tr(ε) I (Eq. 4.7)
            let eps = |k: usize, l: usize| 0.5 * (am[k * e + l] + am[l * e + k]);
            let tr: f64 = (0..e).map(|k| eps(k, k)).sum();
            let sigma = |k: usize, l: usize| {
                2.0 * lame.mu * eps(k, l) + if k == l { lame.lambda * tr } else { 0.0 }
            };
            // exact nodal forces: f_i = ∫_∂Ω B_i σ n dA; a boundary facet's Bernstein
            // polynomials each integrate to |facet| / C(p + d - 1, d - 1)
            let sm = h.mesh();
            let mut fexact = vec![0.0; u.len()];
            let alphas = tessera_fem::multi_index::multi_indices(d, p);
            let m = alphas.len();
            let denom = tessera_fem::multi_index::binomial(p + d - 1, d - 1) as f64;
            // boundary facets: facets of exactly one cell; find by counting sorted vertex tuples
            let mut facet_count = std::collections::HashMap::new();
            for cidx in 0..sm.num_cells() {
                let cv = sm.cell(cidx);
                for opp in 0..=d {
                    let mut f: Vec<u32> = cv
                        .iter()
                        .enumerate()
                        .filter(|&(i, _)| i != opp)
                        .map(|(_, &v)| v)
                        .collect();
                    f.sort_unstable();
                    *facet_count.entry(f).or_insert(0) += 1;
                }
            }
            let pos = sm.positions();
            let mut nodes = vec![0u32; m];
            for cidx in 0..sm.num_cells() {
                let cv = sm.cell(cidx);
                let mut cen = [0.0; 3];
                for &v in cv {
                    for k in 0..3 {
                        cen[k] += pos[v as usize][k] / (d + 1) as f64;
                    }
                }
                h.cell_nodes(cidx, &mut nodes);
                for opp in 0..=d {
                    let fv: Vec<u32> = cv
                        .iter()
                        .enumerate()
                        .filter(|&(i, _)| i != opp)
                        .map(|(_, &v)| v)
                        .collect();
                    let mut key = fv.clone();
                    key.sort_unstable();
                    if facet_count[&key] != 1 {
                        continue;
                    }
                    let fp: Vec<[f64; 3]> = fv.iter().map(|&v| pos[v as usize]).collect();
                    let an = facet_area_normal(d, &fp, cen);
                    for (loc, al) in alphas.iter().enumerate() {
                        if al[opp] != 0 {
                            continue;
                        }
                        let nd = nodes[loc] as usize;
                        for k in 0..e {
                            fexact[nd * e + k] +=
                                (0..e).map(|l| sigma(k, l) * an[l]).sum::<f64>() / denom;
                        }
                    }
                }
            }
            let fmax = fexact.iter().fold(0.0f64, |acc, v| acc.max(v.abs()));
            assert!(fmax > 0.0);
            for i in 0..u.len() {
                assert!(
                    (f[i] - fexact[i]).abs() <= 1e-9 * fmax,
                    "d={d} p={p} dof {i}: K u = {} vs {}",
                    f[i],
                    fexact[i]
                );
            }
            // and uᵀ K u = 2 · strain energy = (λ tr(ε)² + 2 μ ε:ε) · volume
            let vol: f64 = (0..sm.num_cells())
                .map(|cidx| {
                    let v: Vec<[f64; 3]> = sm.cell(cidx).iter().map(|&i| pos[i as usize]).collect();
                    tessera_fem::element::CellGeometry::new(d, &v, cidx)
                        .unwrap()
                        .volume
                })
                .sum();
            let ee: f64 = (0..e)
                .flat_map(|k| (0..e).map(move |l| (k, l)))
                .map(|(k, l)| eps(k, l).powi(2))
                .sum();
            let energy = (lame.lambda * tr * tr + 2.0 * lame.mu * ee) * vol;
            let uku: f64 = u.iter().zip(&f).map(|(a, b)| a * b).sum();
            assert!(
                (uku - energy).abs() <= 1e-9 * energy,
                "d={d} p={p}: {uku} vs {energy}"
            );
        }
    }
}

#[test]
fn invariant_to_cell_vertex_reordering() {
    for (d, mesh) in meshes() {
        // rotate every cell's vertex list by a cell-dependent amount and swap two for odd cells
        let (dim, mut cv, pos) = mesh.clone().into_parts();
        let m = dim + 1;
        for (c, row) in cv.chunks_mut(m).enumerate() {
            row.rotate_left(c % m);
            if c % 2 == 1 {
                row.swap(0, 1);
            }
        }
        let permuted = SimplexMesh::new(dim, cv, pos).unwrap();
        for p in 1..=3 {
            let a: Assembly<f64> = assemble_stiffness(
                &ho(mesh.clone(), p),
                &material(),
                &opts(Summation::PerNode, Par::Rayon),
            )
            .unwrap();
            let b: Assembly<f64> = assemble_stiffness(
                &ho(permuted.clone(), p),
                &material(),
                &opts(Summation::PerNode, Par::Rayon),
            )
            .unwrap();
            assert_eq!(
                a.matrix.pattern(),
                b.matrix.pattern(),
                "d={d} p={p}: same pattern"
            );
            let norm = a.matrix.frobenius_norm();
            for (x, y) in a
                .matrix
                .values()
                .iter()
                .zip(b.matrix.values())
                .chain(a.matrix.diag().iter().zip(b.matrix.diag()))
            {
                assert!((x - y).abs() <= 1e-12 * norm, "d={d} p={p}: {x} vs {y}");
            }
        }
    }
}

#[test]
fn mass_matrix_sums_to_mass() {
    let mat = material();
    for (d, mesh) in meshes() {
        for p in 1..=3 {
            let h = ho(mesh.clone(), p);
            let vol: f64 = {
                let sm = h.mesh();
                (0..sm.num_cells())
                    .map(|c| {
                        let v: Vec<[f64; 3]> = sm
                            .cell(c)
                            .iter()
                            .map(|&i| sm.positions()[i as usize])
                            .collect();
                        tessera_fem::element::CellGeometry::new(d, &v, c)
                            .unwrap()
                            .volume
                    })
                    .sum()
            };
            for s in [Summation::PerNode, Summation::Inline, Summation::PerEntry] {
                let a: Assembly<f64> = assemble_mass(&h, &mat, &opts(s, Par::Rayon)).unwrap();
                let n = h.num_nodes() * d;
                for comp in 0..d {
                    let ones: Vec<f64> = (0..n)
                        .map(|r| if r % d == comp { 1.0 } else { 0.0 })
                        .collect();
                    let mut y = vec![0.0; n];
                    a.matrix.spmv(Par::Rayon, &ones, &mut y).unwrap();
                    let total: f64 = y.iter().zip(&ones).map(|(a, b)| a * b).sum();
                    assert!(
                        (total - mat.density * vol).abs() <= 1e-12 * total,
                        "{s:?} p={p}: {total}"
                    );
                }
            }
        }
    }
}

#[test]
fn errors_not_panics() {
    let h = ho(tet_grid([1, 1, 1], 3), 1);
    let o = AssembleOptions {
        summation: Summation::PerNode,
        par: Par::Seq,
        device: DeviceChoice::Cuda(0),
    };
    let e = assemble_stiffness::<f64>(&h, &material(), &o).unwrap_err();
    assert!(e.to_string().contains("cuda"), "{e}");
    let bad = Material::new(1.0, 0.7, 1.0);
    assert!(assemble_stiffness::<f64>(&h, &bad, &opts(Summation::PerNode, Par::Seq)).is_err());
    // a flat tetrahedron is reported with its index
    let flat = SimplexMesh::new(
        3,
        vec![0, 1, 2, 3],
        vec![[0.0; 3], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [1.0, 1.0, 0.0]],
    )
    .unwrap();
    for s in [Summation::PerNode, Summation::Inline, Summation::PerEntry] {
        let e = assemble_stiffness::<f64>(&ho(flat.clone(), 2), &material(), &opts(s, Par::Seq))
            .unwrap_err();
        assert!(e.to_string().contains("degenerate cell 0"), "{e}");
    }
}

/// `((row, column), (sum, Σ|contribution|, contributions))` of one scalar entry.
type CooEntry = ((usize, usize), (f64, f64, usize));

/// Scalar-entry COO reference of Eq. 4.1 (`K_ijkl = Σ_{T ∋ i, j} E_{T, L_T(i) L_T(j) kl}`):
/// every element block of every cell as triplets, sorted by (row, column) and reduced in
/// `f64`. Per entry: the sum, the sum of absolute contributions and their count.
fn coo_sort_reference(h: &HoMesh, op: Operator) -> Vec<CooEntry> {
    use tessera_fem::element::{sym_index, CellGeometry, ElementTemplate};
    let d = h.dim();
    let m = h.nodes_per_cell();
    let t = ElementTemplate::new(d, h.order()).unwrap();
    let (e, e2) = (d, d * d);
    let sm = h.mesh();
    let mut sym = vec![0.0; t.sym_len()];
    let mut nodes = vec![0u32; m];
    let mut trip: Vec<(usize, usize, f64)> = Vec::new();
    for c in 0..h.num_cells() {
        let v: Vec<[f64; 3]> = sm
            .cell(c)
            .iter()
            .map(|&x| sm.positions()[x as usize])
            .collect();
        let g = CellGeometry::new(d, &v, c).unwrap();
        match op {
            Operator::Stiffness(l) => t.stiffness_sym(&g, l, &mut sym),
            Operator::Mass(rho) => t.mass_sym(&g, rho, &mut sym),
        }
        h.cell_nodes(c, &mut nodes);
        for a in 0..m {
            for b in 0..m {
                let (s, tr) = if a <= b {
                    (sym_index(a, b, m), false)
                } else {
                    (sym_index(b, a, m), true)
                };
                let blk = &sym[s * e2..(s + 1) * e2];
                for k in 0..e {
                    for l in 0..e {
                        let v = if tr { blk[l * e + k] } else { blk[k * e + l] };
                        trip.push((nodes[a] as usize * e + k, nodes[b] as usize * e + l, v));
                    }
                }
            }
        }
    }
    // stable: contributions of an entry stay in cell order
    trip.sort_by_key(|&(r, c, _)| (r, c));
    let mut out: Vec<CooEntry> = Vec::new();
    for (r, c, v) in trip {
        match out.last_mut() {
            Some((rc, acc)) if *rc == (r, c) => {
                acc.0 += v;
                acc.1 += v.abs();
                acc.2 += 1;
            }
            _ => out.push(((r, c), (v, v.abs(), 1))),
        }
    }
    out
}

/// `a` against the COO reference: the same scalar pattern (indices exact) and every value
/// within `(contributions + 2) ε_T Σ|contributions|` (conversion to `T` and summation order).
fn assert_matches_coo<T: tessera_sparse::binbcsr::Scalar>(
    a: &BinBcsr<T>,
    want: &[CooEntry],
    eps: f64,
    what: &str,
) {
    let csr = a.to_csr();
    let mut got = Vec::with_capacity(want.len());
    for r in 0..csr.nrows {
        for k in csr.row_ptr[r] as usize..csr.row_ptr[r + 1] as usize {
            got.push(((r, csr.col_idx[k] as usize), csr.values[k].to_f64()));
        }
    }
    assert_eq!(got.len(), want.len(), "{what}: scalar non-zeros");
    for (&(rc, x), &(wrc, (y, abs, n))) in got.iter().zip(want) {
        assert_eq!(rc, wrc, "{what}: pattern");
        let tol = (n + 2) as f64 * eps * abs + 1e-300;
        assert!(
            (x - y).abs() <= tol,
            "{what}: entry {rc:?}: {x} vs {y} (tol {tol:e})"
        );
    }
}

/// The per-node and inline summations (contributions added at the positions the map built
/// with the pattern holds) equal the COO-sort reference of Eq. 4.1 at p = 1, 2, 3, in f64 and
/// f32, on a mesh of several bins with uneven rows; on 1 and on 4 rayon threads the results
/// are bit-identical to each other and to the sequential path.
#[test]
fn per_node_matches_coo_sort_reference_on_1_and_4_threads() {
    let lame = material().lame().unwrap();
    let pools: Vec<rayon::ThreadPool> = [1, 4]
        .iter()
        .map(|&n| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(n)
                .build()
                .unwrap()
        })
        .collect();
    for mesh in [tet_grid([5, 4, 3], 11), tri_grid([9, 7], 12)] {
        for p in 1..=3 {
            let h = ho(mesh.clone(), p);
            for op in [Operator::Stiffness(lame), Operator::Mass(7.5)] {
                let want = coo_sort_reference(&h, op);
                for s in [Summation::PerNode, Summation::Inline] {
                    let seq64: BinBcsr<f64> = Assembler::new(&h, s, Par::Seq)
                        .unwrap()
                        .assemble(op)
                        .unwrap();
                    let seq32: BinBcsr<f32> = Assembler::new(&h, s, Par::Seq)
                        .unwrap()
                        .assemble(op)
                        .unwrap();
                    assert!(seq64.pattern().num_bins() > 1);
                    let what = format!("d={} p={p} {op:?} {s:?}", h.dim());
                    assert_matches_coo(&seq64, &want, f64::EPSILON, &format!("{what} f64"));
                    assert_matches_coo(&seq32, &want, f32::EPSILON as f64, &format!("{what} f32"));
                    for pool in &pools {
                        let (r64, r32): (BinBcsr<f64>, BinBcsr<f32>) = pool.install(|| {
                            let mut asm = Assembler::new(&h, s, Par::Rayon).unwrap();
                            (asm.assemble(op).unwrap(), asm.assemble(op).unwrap())
                        });
                        let t = pool.current_num_threads();
                        assert_eq!(r64.pattern(), seq64.pattern(), "{what} {t} threads");
                        assert_eq!(r64.values(), seq64.values(), "{what} {t} threads");
                        assert_eq!(r64.diag(), seq64.diag(), "{what} {t} threads");
                        assert_eq!(r32.values(), seq32.values(), "{what} {t} threads f32");
                        assert_eq!(r32.diag(), seq32.diag(), "{what} {t} threads f32");
                    }
                }
            }
        }
    }
}

/// The inline summation forms each element block from the cell's geometry with the operations
/// of the stored element matrices (blocks below the diagonal transposed), and adds the blocks
/// in the per-node order: its matrices equal the per-node ones bit for bit, stiffness and mass,
/// f64 and f32, sequential and parallel.
#[test]
fn inline_equals_per_node_exactly() {
    let lame = material().lame().unwrap();
    for (_d, mesh) in meshes() {
        for p in 1..=3 {
            let h = ho(mesh.clone(), p);
            for op in [Operator::Stiffness(lame), Operator::Mass(3.25)] {
                for par in [Par::Seq, Par::Rayon] {
                    let a: BinBcsr<f64> = Assembler::new(&h, Summation::PerNode, Par::Seq)
                        .unwrap()
                        .assemble(op)
                        .unwrap();
                    let b: BinBcsr<f64> = Assembler::new(&h, Summation::Inline, par)
                        .unwrap()
                        .assemble(op)
                        .unwrap();
                    assert_eq!(a.values(), b.values(), "p={p} {op:?} {par:?}");
                    assert_eq!(a.diag(), b.diag(), "p={p} {op:?} {par:?}");
                    let a: BinBcsr<f32> = Assembler::new(&h, Summation::PerNode, par)
                        .unwrap()
                        .assemble(op)
                        .unwrap();
                    let b: BinBcsr<f32> = Assembler::new(&h, Summation::Inline, Par::Seq)
                        .unwrap()
                        .assemble(op)
                        .unwrap();
                    assert_eq!(a.values(), b.values(), "p={p} {op:?} {par:?} f32");
                    assert_eq!(a.diag(), b.diag(), "p={p} {op:?} {par:?} f32");
                }
            }
        }
    }
}

/// The default summation is inline on the CPU up to p = 3 (per-node above and on the GPU),
/// and gives the per-node values bit for bit.
#[test]
fn auto_summation_is_inline_on_the_cpu_with_the_same_values() {
    assert_eq!(AssembleOptions::default().summation, Summation::Auto);
    for p in 1..=3 {
        assert_eq!(Summation::Auto.resolve(true, p), Summation::Inline);
        assert_eq!(Summation::Auto.resolve(false, p), Summation::PerNode);
    }
    assert_eq!(Summation::Auto.resolve(true, 4), Summation::PerNode);
    assert_eq!(Summation::PerEntry.resolve(true, 1), Summation::PerEntry);
    assert_eq!("auto".parse::<Summation>(), Ok(Summation::Auto));
    let lame = material().lame().unwrap();
    for (_d, mesh) in meshes() {
        for p in [1, 2, 4] {
            let h = ho(mesh.clone(), p);
            let mut auto = Assembler::new(&h, Summation::Auto, Par::Rayon).unwrap();
            let want = if p <= 3 {
                Summation::Inline
            } else {
                Summation::PerNode
            };
            assert_eq!(auto.summation(), want);
            let a: BinBcsr<f32> = auto.assemble(Operator::Stiffness(lame)).unwrap();
            let b: BinBcsr<f32> = Assembler::new(&h, Summation::PerNode, Par::Seq)
                .unwrap()
                .assemble(Operator::Stiffness(lame))
                .unwrap();
            assert_eq!(a.values(), b.values(), "p={p}");
            assert_eq!(a.diag(), b.diag(), "p={p}");
        }
    }
}
