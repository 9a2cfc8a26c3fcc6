//! CPU references of all layouts (dissertation §5.3.1) against the plain CSR-AoS reference,
//! for all built-in entry types, a user TOML entry and both precisions; the quaternion SpMV
//! against the independent 4x4 real expansion (Eq. 5.1); memory overhead (seed 002 Table 9).

use tessera_core::Par;
use tessera_spmv::gpu::{test_vector, verify_cpu};
use tessera_spmv::layout::{compare, memory_overhead_with, pack_vector, unpack_vector};
use tessera_spmv::matrices::{
    expand_blocks, expand_quaternion, mesh::TriMesh, random_matrix, MatrixSource,
};
use tessera_spmv::{CsrMatrix, EntrySpec, Layout, LayoutMatrix, Precision, Scalar};

const USER: &str = r#"
name = "twisted"
[matrix]
fields = [{ name = "s", type = "real" }, { name = "t", type = "real" }]
[vector]
fields = [{ name = "p" }, { name = "q" }, { name = "r" }]
[multiply]
p = "a.s*x.p - 0.5*a.t*x.r"
q = "a.t*x.q + 2*a.s*x.r"
r = "a.s*x.q"
[zero]
p = 0.0
"#;

fn specs() -> Vec<EntrySpec> {
    let mut v: Vec<EntrySpec> = [
        "real",
        "complex",
        "quaternion",
        "dualquat",
        "block2",
        "block3",
        "block4",
        "block6",
    ]
    .iter()
    .map(|n| EntrySpec::builtin(n).unwrap())
    .collect();
    v.push(EntrySpec::from_toml_str(USER, "user.toml").unwrap());
    v
}

/// 301 rows (not a multiple of 16 or 32), skewed rows (a few 20x longer), some empty rows.
fn test_matrix(l: usize) -> CsrMatrix<f64> {
    let mut a = random_matrix(301, 6, l, true, 11).unwrap();
    // empty rows 7 and 300
    for &r in &[7usize, 300] {
        let (b, e) = (a.row_ptr[r] as usize, a.row_ptr[r + 1] as usize);
        a.col_idx.drain(b..e);
        a.values.drain(b * l..e * l);
        let d = (e - b) as u32;
        for p in &mut a.row_ptr[r + 1..] {
            *p -= d;
        }
    }
    a.validate().unwrap();
    a
}

#[test]
fn every_layout_matches_csr_aos_reference() {
    for spec in specs() {
        let a = test_matrix(spec.matrix_len());
        for p in Precision::ALL {
            let checks = match p {
                Precision::F32 => verify_cpu::<f32>(&spec, &a, &Layout::all()),
                Precision::F64 => verify_cpu::<f64>(&spec, &a, &Layout::all()),
            }
            .unwrap();
            assert_eq!(checks.len(), 16);
            for c in checks {
                assert!(
                    c.ok,
                    "{} {p} {}: rel err {} (or Seq != Rayon)",
                    spec.name, c.layout, c.max_rel_err
                );
                // the layouts perform the same operations in the same order: exact agreement
                assert_eq!(c.max_rel_err, 0.0, "{} {p} {}", spec.name, c.layout);
            }
        }
    }
}

#[test]
fn layout_conversion_shapes() {
    let spec = EntrySpec::builtin("complex").unwrap();
    let a: CsrMatrix<f32> = test_matrix(2).cast();
    let maxlen = a.max_row_len();
    let ell = LayoutMatrix::from_csr(&a, "ell-soa-aos".parse().unwrap()).unwrap();
    assert_eq!(ell.ell_stride, 320);
    assert_eq!(ell.slots, maxlen * 320);
    assert_eq!(ell.outer.len(), 301);
    let s16 = LayoutMatrix::from_csr(&a, "sell16-aos-aos".parse().unwrap()).unwrap();
    assert_eq!(s16.outer.len(), 301usize.div_ceil(16) + 1);
    assert_eq!(s16.slots % 16, 0);
    assert!(s16.slots >= a.nnz() && s16.slots <= ell.slots);
    let csr = LayoutMatrix::from_csr(&a, Layout::NATURAL).unwrap();
    assert_eq!(csr.vals, a.values);
    // SoA vectors round trip
    let x = test_vector::<f32>(301, spec.vector_len(), 4);
    let packed = pack_vector(&x, 301, 2, tessera_spmv::Aos::Soa);
    assert_eq!(packed[301], x[1]);
    assert_eq!(unpack_vector(&packed, 301, 2, tessera_spmv::Aos::Soa), x);
    // invalid input is an error, not a panic
    let mut bad = a.clone();
    bad.col_idx[0] = 10_000;
    assert!(LayoutMatrix::from_csr(&bad, Layout::NATURAL).is_err());
}

fn quaternion_vs_expansion<T: Scalar>(q: &CsrMatrix<f64>) {
    let quat = EntrySpec::builtin("quaternion").unwrap();
    let block4 = EntrySpec::builtin("block4").unwrap();
    let real = EntrySpec::builtin("real").unwrap();
    let x = test_vector::<T>(q.n_cols, 4, 9);
    let a: CsrMatrix<T> = q.cast();
    let scale = a.spmv_abs(&quat, &x);
    // Hamilton-product SpMV in every layout
    for l in Layout::all() {
        let m = LayoutMatrix::from_csr(&a, l).unwrap();
        let y = unpack_vector(
            &m.spmv(&quat, &pack_vector(&x, q.n_cols, 4, l.vector), Par::Rayon),
            q.n_rows,
            4,
            l.vector,
        );
        // independent: 4x4 real blocks of Eq. 5.1 (block4 entries) and the fully expanded real matrix
        let e4: CsrMatrix<T> = expand_quaternion(q).unwrap().cast();
        let y4 = e4.spmv(&block4, &x, Par::Seq);
        let er: CsrMatrix<T> = expand_blocks(&expand_quaternion(q).unwrap(), 4)
            .unwrap()
            .cast();
        let yr = er.spmv(&real, &x, Par::Seq);
        let tol = 64.0 * T::EPS;
        assert!(
            compare(&y, &y4, &scale, tol).1,
            "{l} {:?}: quaternion != 4x4 block expansion",
            T::PRECISION
        );
        assert!(
            compare(&y, &yr, &scale, tol).1,
            "{l} {:?}: quaternion != real expansion",
            T::PRECISION
        );
    }
}

#[test]
fn quaternion_spmv_equals_real_4x4_expansion() {
    let q = TriMesh::icosphere(2)
        .dirac_operator(|f| 0.1 * (f % 5) as f64)
        .unwrap();
    quaternion_vs_expansion::<f32>(&q);
    quaternion_vs_expansion::<f64>(&q);
    let t = TriMesh::torus(9, 7).dirac_operator(|_| 0.25).unwrap();
    quaternion_vs_expansion::<f64>(&t);
}

#[test]
fn memory_overhead_table9() {
    // Table 9 convention: 4-byte indices, 8-byte scalars (a complex entry is 16 bytes).
    let a = random_matrix(1000, 10, 2, true, 3).unwrap();
    let (base, r) = memory_overhead_with(&a, 4, 8).unwrap();
    assert_eq!(base, (1001 + a.nnz()) * 4 + a.nnz() * 16);
    let ell = LayoutMatrix::from_csr(&a, "ell-aos-aos".parse().unwrap()).unwrap();
    let want = ((1000 + ell.slots) * 4 + ell.slots * 16) as f64 / base as f64;
    assert!((r[0] - want).abs() < 1e-12);
    // skewed rows: ELL pays for the longest row, sliced ELLPACK much less
    assert!(r[0] > 3.0 * r[1] && r[1] >= 1.0 && r[2] >= r[1] * 0.99);
}

/// Seed 002, Table 9 gives mhd1280b: CSR 449.9 KiB, ELL 1.8x, SI-16 1.5x, SI-32 1.7x.
#[test]
fn memory_overhead_of_mhd1280b_matches_table9() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/matrices/mhd1280b.mtx.gz"
    );
    if !std::path::Path::new(path).exists() {
        eprintln!("skipping: {path} not present");
        return;
    }
    let spec = EntrySpec::builtin("complex").unwrap();
    let (a, note) = MatrixSource::parse(path).unwrap().load(&spec).unwrap();
    assert!(note.is_none());
    assert_eq!((a.n_rows, a.nnz()), (1280, 22778));
    let (base, r) = memory_overhead_with(&a, 4, 8).unwrap();
    assert!((base as f64 / 1024.0 - 449.9).abs() < 0.05, "{base}");
    println!(
        "mhd1280b: CSR {:.1} KiB, ELL {:.2}x, SI-16 {:.2}x, SI-32 {:.2}x (Table 9: 1.8x 1.5x 1.7x)",
        base as f64 / 1024.0,
        r[0],
        r[1],
        r[2]
    );
    assert!((r[0] - 1.8).abs() < 0.05, "ELL {}", r[0]);
    assert!((r[1] - 1.5).abs() < 0.05, "SI-16 {}", r[1]);
    assert!((r[2] - 1.7).abs() < 0.05, "SI-32 {}", r[2]);
}

#[test]
fn seq_and_rayon_give_identical_results() {
    let spec = EntrySpec::builtin("dualquat").unwrap();
    let a: CsrMatrix<f32> = test_matrix(8).cast();
    let x = test_vector::<f32>(301, 8, 2);
    assert_eq!(a.spmv(&spec, &x, Par::Seq), a.spmv(&spec, &x, Par::Rayon));
}
