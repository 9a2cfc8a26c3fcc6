//! Element matrices (dissertation §4.4.4): the closed-form Bernstein-Bézier element against an
//! independent quadrature element, symmetry, rigid modes, positive definiteness on their
//! complement, the uniform-strain energy and the mass sums.

use tessera_fem::element::{sym_index, CellGeometry, ElementTemplate};
use tessera_fem::material::{Lame, Material};
use tessera_fem::quadrature::{grundmann_moeller, index_for_degree};

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

fn random_simplex(d: usize, g: &mut Lcg) -> Vec<[f64; 3]> {
    loop {
        let mut v = vec![[0.0; 3]; d + 1];
        for (i, p) in v.iter_mut().enumerate() {
            for k in 0..d {
                p[k] = g.f() + if k + 1 == i { 1.0 } else { 0.0 };
            }
            if d == 2 {
                p[2] = 0.25;
            }
        }
        if let Ok(geo) = CellGeometry::new(d, &v, 0) {
            if geo.volume > 0.05 {
                return v;
            }
        }
    }
}

/// Inverse of a small dense matrix by Gauss-Jordan with partial pivoting.
fn invert(a: &[f64], n: usize) -> Vec<f64> {
    let mut m = a.to_vec();
    let mut inv = vec![0.0; n * n];
    for i in 0..n {
        inv[i * n + i] = 1.0;
    }
    for c in 0..n {
        let piv = (c..n)
            .max_by(|&x, &y| m[x * n + c].abs().total_cmp(&m[y * n + c].abs()))
            .unwrap();
        for k in 0..n {
            m.swap(c * n + k, piv * n + k);
            inv.swap(c * n + k, piv * n + k);
        }
        let d = m[c * n + c];
        for k in 0..n {
            m[c * n + k] /= d;
            inv[c * n + k] /= d;
        }
        for r in 0..n {
            if r != c {
                let f = m[r * n + c];
                for k in 0..n {
                    m[r * n + k] -= f * m[c * n + k];
                    inv[r * n + k] -= f * inv[c * n + k];
                }
            }
        }
    }
    inv
}

fn factorial(n: usize) -> f64 {
    (1..=n).map(|k| k as f64).product()
}

/// The independent quadrature element: barycentric gradients from the inverse of the
/// barycentric system, BB basis values and gradients evaluated pointwise at Grundmann-Möller
/// points (chain rule), and `K = ∫ Bᵀ D B` in Voigt notation with
/// `D = λ 1 1ᵀ + μ diag(2, .., 2, 1, .., 1)` (plane strain for d = 2).
fn quadrature_element(
    d: usize,
    p: usize,
    v: &[[f64; 3]],
    lame: Lame,
    rho: f64,
) -> (Vec<f64>, Vec<f64>) {
    let nv = d + 1;
    // [1 … 1; x_0 … x_d] ξ = [1; x]
    let mut sys = vec![0.0; nv * nv];
    for j in 0..nv {
        sys[j] = 1.0;
        for k in 0..d {
            sys[(k + 1) * nv + j] = v[j][k];
        }
    }
    let inv = invert(&sys, nv);
    let grad = |i: usize, k: usize| inv[i * nv + k + 1];
    let det: f64 = {
        // volume from the determinant of the edge matrix
        let mut e = vec![0.0; d * d];
        for r in 0..d {
            for c in 0..d {
                e[r * d + c] = v[c + 1][r] - v[0][r];
            }
        }
        if d == 2 {
            e[0] * e[3] - e[1] * e[2]
        } else {
            e[0] * (e[4] * e[8] - e[5] * e[7]) - e[1] * (e[3] * e[8] - e[5] * e[6])
                + e[2] * (e[3] * e[7] - e[4] * e[6])
        }
    };
    let vol = det.abs() / factorial(d);
    let alphas = tessera_fem::multi_index::multi_indices(d, p);
    let m = alphas.len();
    let n = m * d;
    let nvoigt = if d == 3 { 6 } else { 3 };
    let mut dmat = vec![0.0; nvoigt * nvoigt];
    for r in 0..d {
        for c in 0..d {
            dmat[r * nvoigt + c] = lame.lambda;
        }
        dmat[r * nvoigt + r] += 2.0 * lame.mu;
    }
    for r in d..nvoigt {
        dmat[r * nvoigt + r] = lame.mu;
    }
    // Voigt shear pairs
    let shear: &[(usize, usize)] = if d == 3 {
        &[(1, 2), (0, 2), (0, 1)]
    } else {
        &[(0, 1)]
    };
    let mut kmat = vec![0.0; n * n];
    for q in grundmann_moeller(d, index_for_degree(2 * (p - 1))) {
        let mut bmat = vec![0.0; nvoigt * n];
        for (a, al) in alphas.iter().enumerate() {
            let pre = factorial(p) / al.iter().map(|&x| factorial(x as usize)).product::<f64>();
            let mut gx = [0.0; 3];
            for i in 0..nv {
                if al[i] == 0 {
                    continue;
                }
                let mut dv = pre * al[i] as f64;
                for j in 0..nv {
                    let ex = al[j] as i32 - if j == i { 1 } else { 0 };
                    dv *= q.bary[j].powi(ex);
                }
                for k in 0..d {
                    gx[k] += dv * grad(i, k);
                }
            }
            for k in 0..d {
                bmat[k * n + a * d + k] = gx[k];
            }
            for (s, &(r, c)) in shear.iter().enumerate() {
                bmat[(d + s) * n + a * d + r] = gx[c];
                bmat[(d + s) * n + a * d + c] = gx[r];
            }
        }
        for i in 0..n {
            for j in 0..n {
                let mut acc = 0.0;
                for r in 0..nvoigt {
                    for c in 0..nvoigt {
                        acc += bmat[r * n + i] * dmat[r * nvoigt + c] * bmat[c * n + j];
                    }
                }
                kmat[i * n + j] += q.weight * vol * acc;
            }
        }
    }
    let mut mmat = vec![0.0; n * n];
    for q in grundmann_moeller(d, index_for_degree(2 * p)) {
        let vals: Vec<f64> = alphas
            .iter()
            .map(|al| {
                factorial(p) / al.iter().map(|&x| factorial(x as usize)).product::<f64>()
                    * (0..nv)
                        .map(|j| q.bary[j].powi(al[j] as i32))
                        .product::<f64>()
            })
            .collect();
        for a in 0..m {
            for b in 0..m {
                for k in 0..d {
                    mmat[(a * d + k) * n + b * d + k] += q.weight * vol * rho * vals[a] * vals[b];
                }
            }
        }
    }
    (kmat, mmat)
}

fn max_abs(a: &[f64]) -> f64 {
    a.iter().fold(0.0, |m, v| m.max(v.abs()))
}

#[test]
fn closed_form_matches_quadrature_element() {
    let lame = Material::new(210.0, 0.3, 7.8).lame().unwrap();
    let mut g = Lcg(42);
    for d in 2..=3 {
        for p in 1..=4 {
            let t = ElementTemplate::new(d, p).unwrap();
            for _ in 0..3 {
                let v = random_simplex(d, &mut g);
                let geo = CellGeometry::new(d, &v, 0).unwrap();
                let k = t.stiffness_dense(&geo, lame);
                let m = t.mass_dense(&geo, 7.8);
                let (kq, mq) = quadrature_element(d, p, &v, lame, 7.8);
                let (sk, sm) = (max_abs(&kq), max_abs(&mq));
                for i in 0..k.len() {
                    assert!(
                        (k[i] - kq[i]).abs() <= 1e-10 * sk,
                        "K d={d} p={p} entry {i}: {} vs {}",
                        k[i],
                        kq[i]
                    );
                    assert!(
                        (m[i] - mq[i]).abs() <= 1e-10 * sm,
                        "M d={d} p={p} entry {i}: {} vs {}",
                        m[i],
                        mq[i]
                    );
                }
            }
        }
    }
}

/// Symmetric Jacobi eigenvalue iteration (cyclic sweeps), small dense matrices only.
fn jacobi_eigenvalues(a: &[f64], n: usize) -> Vec<f64> {
    let mut a = a.to_vec();
    for _sweep in 0..100 {
        let off: f64 = (0..n)
            .flat_map(|i| (0..n).filter(move |&j| j != i).map(move |j| (i, j)))
            .map(|(i, j)| a[i * n + j].powi(2))
            .sum();
        let diag: f64 = (0..n).map(|i| a[i * n + i].powi(2)).sum();
        if off <= 1e-30 * diag {
            break;
        }
        for p in 0..n {
            for q in p + 1..n {
                let apq = a[p * n + q];
                if apq.abs() < 1e-300 {
                    continue;
                }
                let theta = (a[q * n + q] - a[p * n + p]) / (2.0 * apq);
                let t = theta.signum() / (theta.abs() + (theta * theta + 1.0).sqrt());
                let t = if theta == 0.0 { 1.0 } else { t };
                let c = 1.0 / (t * t + 1.0).sqrt();
                let s = t * c;
                for k in 0..n {
                    let akp = a[k * n + p];
                    let akq = a[k * n + q];
                    a[k * n + p] = c * akp - s * akq;
                    a[k * n + q] = s * akp + c * akq;
                }
                for k in 0..n {
                    let apk = a[p * n + k];
                    let aqk = a[q * n + k];
                    a[p * n + k] = c * apk - s * aqk;
                    a[q * n + k] = s * apk + c * aqk;
                }
            }
        }
    }
    let mut ev: Vec<f64> = (0..n).map(|i| a[i * n + i]).collect();
    ev.sort_by(|x, y| x.total_cmp(y));
    ev
}

/// Control points of the BB nodes: `Σ α_i v_i / p` (linear precision).
fn control_points(d: usize, p: usize, v: &[[f64; 3]]) -> Vec<[f64; 3]> {
    tessera_fem::multi_index::multi_indices(d, p)
        .iter()
        .map(|al| {
            let mut x = [0.0; 3];
            for i in 0..=d {
                for k in 0..3 {
                    x[k] += al[i] as f64 * v[i][k] / p as f64;
                }
            }
            x
        })
        .collect()
}

#[test]
fn symmetric_rigid_modes_and_definite_complement() {
    let lame = Material::new(1.0, 0.25, 1.0).lame().unwrap();
    let mut g = Lcg(7);
    for d in 2..=3 {
        for p in 1..=3 {
            let t = ElementTemplate::new(d, p).unwrap();
            let v = random_simplex(d, &mut g);
            let geo = CellGeometry::new(d, &v, 0).unwrap();
            let k = t.stiffness_dense(&geo, lame);
            let n = t.num_nodes() * d;
            let sk = max_abs(&k);
            for i in 0..n {
                for j in 0..n {
                    assert_eq!(k[i * n + j], k[j * n + i], "exactly symmetric");
                }
            }
            // rigid modes: translations and infinitesimal rotations at the control points
            let x = control_points(d, p, &v);
            let mut modes: Vec<Vec<f64>> = Vec::new();
            for c in 0..d {
                modes.push((0..n).map(|r| if r % d == c { 1.0 } else { 0.0 }).collect());
            }
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
            for r in &modes {
                for i in 0..n {
                    let kr: f64 = (0..n).map(|j| k[i * n + j] * r[j]).sum();
                    assert!(
                        kr.abs() <= 1e-11 * sk,
                        "K r != 0: d={d} p={p} row {i}: {kr}"
                    );
                }
            }
            let ev = jacobi_eigenvalues(&k, n);
            let nzero = if d == 3 { 6 } else { 3 };
            let top = ev[n - 1];
            let zeros = ev.iter().filter(|&&x| x.abs() <= 1e-10 * top).count();
            assert_eq!(zeros, nzero, "d={d} p={p} eigenvalues {ev:?}");
            assert!(
                ev[nzero] > 1e-6 * top,
                "positive definite on the complement: {}",
                ev[nzero]
            );
        }
    }
}

#[test]
fn uniform_strain_energy_and_mass_sums() {
    let mat = Material::new(3.0, 0.35, 2.5);
    let lame = mat.lame().unwrap();
    let mut g = Lcg(11);
    for d in 2..=3 {
        for p in 1..=3 {
            let t = ElementTemplate::new(d, p).unwrap();
            let v = random_simplex(d, &mut g);
            let geo = CellGeometry::new(d, &v, 0).unwrap();
            let n = t.num_nodes() * d;
            // u(x) = A x, energy = |T| (λ tr(ε)² + 2μ ε:ε) = uᵀ K u
            let a: Vec<f64> = (0..d * d).map(|_| g.f()).collect();
            let x = control_points(d, p, &v);
            let mut u = vec![0.0; n];
            for (node, xn) in x.iter().enumerate() {
                for k in 0..d {
                    u[node * d + k] = (0..d).map(|l| a[k * d + l] * xn[l]).sum();
                }
            }
            let k = t.stiffness_dense(&geo, lame);
            let uku: f64 = (0..n)
                .map(|i| u[i] * (0..n).map(|j| k[i * n + j] * u[j]).sum::<f64>())
                .sum();
            let eps = |k: usize, l: usize| 0.5 * (a[k * d + l] + a[l * d + k]);
            let tr: f64 = (0..d).map(|k| eps(k, k)).sum();
            let ee: f64 = (0..d)
                .flat_map(|k| (0..d).map(move |l| (k, l)))
                .map(|(k, l)| eps(k, l).powi(2))
                .sum();
            let energy = geo.volume * (lame.lambda * tr * tr + 2.0 * lame.mu * ee);
            assert!(
                (uku - energy).abs() <= 1e-11 * energy.abs().max(1e-3),
                "d={d} p={p}: {uku} vs {energy}"
            );

            let m = t.mass_dense(&geo, mat.density);
            for c in 0..d {
                let s: f64 = (0..n)
                    .filter(|r| r % d == c)
                    .flat_map(|r| (0..n).map(move |q| (r, q)))
                    .map(|(r, q)| m[r * n + q])
                    .sum();
                assert!(
                    (s - mat.density * geo.volume).abs() <= 1e-12 * s,
                    "mass sum {s}"
                );
            }
            let ev = jacobi_eigenvalues(&m, n);
            assert!(ev[0] > 0.0, "mass matrix positive definite");
        }
    }
}

#[test]
fn row_and_symmetric_forms_agree_and_errors() {
    let lame = Material::new(1.0, 0.3, 1.0).lame().unwrap();
    let t = ElementTemplate::new(3, 3).unwrap();
    let mut g = Lcg(5);
    let v = random_simplex(3, &mut g);
    let geo = CellGeometry::new(3, &v, 0).unwrap();
    let dense = t.stiffness_dense(&geo, lame);
    let n = t.num_nodes() * 3;
    let mut row = vec![0.0; t.num_nodes() * 9];
    for a in 0..t.num_nodes() {
        t.stiffness_row(&geo, lame, a, &mut row);
        for b in 0..t.num_nodes() {
            for k in 0..3 {
                for l in 0..3 {
                    assert_eq!(row[b * 9 + k * 3 + l], dense[(a * 3 + k) * n + b * 3 + l]);
                }
            }
        }
    }
    assert_eq!(t.vertex_locals(), vec![0, 10, 16, 19]);
    // degenerate and bad inputs are errors, not panics
    let flat = [
        [0.0, 0.0, 0.0],
        [1.0, 0.0, 0.0],
        [0.0, 1.0, 0.0],
        [1.0, 1.0, 0.0],
    ];
    assert!(CellGeometry::new(3, &flat, 3).is_err());
    let tilted = [[0.0, 0.0, 0.0], [1.0, 0.0, 0.5], [0.0, 1.0, 0.0]];
    assert!(CellGeometry::new(2, &tilted, 0).is_err());
    assert!(ElementTemplate::new(4, 1).is_err());
    assert!(ElementTemplate::new(3, 0).is_err());
}

/// The element kernels that write the value type directly (used by the assembly) give the
/// same numbers, bit for bit, as the f64 symmetric matrices, for every dimension and order.
#[test]
fn direct_kernels_equal_the_f64_matrices_exactly() {
    let mut g = Lcg(7);
    let lame = Material::new(3.0, 0.27, 1.0).lame().unwrap();
    for d in [2, 3] {
        for p in 1..=4 {
            let t = ElementTemplate::new(d, p).unwrap();
            for _ in 0..20 {
                let v = random_simplex(d, &mut g);
                let geo = CellGeometry::new(d, &v, 0).unwrap();
                let mut want = vec![0.0; t.sym_len()];
                t.stiffness_sym(&geo, lame, &mut want);
                let mut got = vec![0.0f64; t.sym_len()];
                t.stiffness_sym_as(&geo, lame, &mut got);
                assert_eq!(got, want, "stiffness d={d} p={p}");
                let mut got32 = vec![0.0f32; t.sym_len()];
                t.stiffness_sym_as(&geo, lame, &mut got32);
                let want32: Vec<f32> = want.iter().map(|&x| x as f32).collect();
                assert_eq!(got32, want32, "stiffness f32 d={d} p={p}");
                t.mass_sym(&geo, 2.5, &mut want);
                t.mass_sym_as(&geo, 2.5, &mut got);
                assert_eq!(got, want, "mass d={d} p={p}");
            }
        }
    }
}

/// The row kernel of the inline summation (the general one and the p = 1 one) gives every
/// block of the stored symmetric element matrix bit for bit (signs of zero included), the
/// blocks below the diagonal as the stored ones transposed.
#[test]
fn row_kernels_equal_the_stored_blocks_bitwise() {
    fn check<const E: usize, const E2: usize>(t: &ElementTemplate, geo: &CellGeometry, lame: Lame) {
        let m = t.num_nodes();
        let mut sym = vec![0.0f64; t.sym_len()];
        t.stiffness_sym_as(geo, lame, &mut sym);
        for a in 0..m {
            let mut seen = 0;
            t.stiffness_row_with::<f64, E, E2>(geo, lame, a, |b, blk: [f64; E2]| {
                assert_eq!(b, seen, "blocks in increasing order");
                seen += 1;
                let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
                let s = &sym[sym_index(lo, hi, m) * E2..][..E2];
                for k in 0..E {
                    for l in 0..E {
                        let want = if a <= b { s[k * E + l] } else { s[l * E + k] };
                        assert_eq!(
                            blk[k * E + l].to_bits(),
                            want.to_bits(),
                            "p={} a={a} b={b} ({k}, {l})",
                            t.order()
                        );
                    }
                }
            });
            assert_eq!(seen, m);
        }
    }
    let mut g = Lcg(11);
    let lame = Material::new(3.0, 0.27, 1.0).lame().unwrap();
    for d in [2, 3] {
        for p in 1..=4 {
            let t = ElementTemplate::new(d, p).unwrap();
            for _ in 0..20 {
                let v = random_simplex(d, &mut g);
                let geo = CellGeometry::new(d, &v, 0).unwrap();
                if d == 3 {
                    check::<3, 9>(&t, &geo, lame);
                } else {
                    check::<2, 4>(&t, &geo, lame);
                }
            }
        }
    }
}
