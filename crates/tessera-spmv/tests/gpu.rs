//! GPU conformance (DESIGN.md: `<op>_matches_reference`): every generated variant (entry
//! types x precisions x layouts x schedule families with several n_b / n_t) against the CPU
//! reference, and the cuSPARSE baselines against the same reference. Needs a CUDA GPU; skips
//! cleanly without one.

use tessera_core::Par;
use tessera_gpu::cusparse::CusparseSpmv;
use tessera_spmv::gpu::{conformance_schedules, test_vector, verify_gpu, SpmvGpu};
use tessera_spmv::layout::{compare, default_rtol};
use tessera_spmv::matrices::{expand_quaternion, random_matrix, MatrixSource};
use tessera_spmv::{CsrMatrix, EntrySpec, Layout, Precision, Scalar, SpmvError};

fn gpu() -> Option<SpmvGpu> {
    match SpmvGpu::new(0) {
        Ok(g) => Some(g),
        Err(SpmvError::NoGpu(m)) => {
            eprintln!("skipping: no CUDA GPU ({m})");
            None
        }
        Err(e) => panic!("GPU present but unusable: {e}"),
    }
}

/// 3001 rows (well above a warp, not a multiple of 32), uneven rows (a few 20x longer), fixed seed.
fn matrix(l: usize) -> CsrMatrix<f64> {
    random_matrix(3001, 9, l, true, 21).unwrap()
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn spmv_variants_match_reference() {
    let Some(g) = gpu() else { return };
    eprintln!(
        "device: {} ({}, {} SMs)",
        g.limits.name,
        g.limits.sm(),
        g.limits.n_sm
    );
    let scheds = conformance_schedules();
    let mut specs: Vec<EntrySpec> = ["real", "complex", "quaternion", "dualquat", "block3"]
        .iter()
        .map(|n| EntrySpec::builtin(n).unwrap())
        .collect();
    specs.push(
        EntrySpec::from_toml_str(
            "name = \"user\"\n[matrix]\nfields = [{name = \"s\"}, {name = \"t\"}]\n[vector]\nfields = [{name = \"p\"}, {name = \"q\"}, {name = \"r\"}]\n[multiply]\np = \"a.s*x.p - 0.5*a.t*x.r\"\nq = \"a.t*x.q + 2*a.s*x.r\"\nr = \"a.s*x.q\"\n",
            "user.toml",
        )
        .unwrap(),
    );
    let mut n = 0;
    let mut failures = Vec::new();
    for spec in &specs {
        let a = matrix(spec.matrix_len());
        for p in Precision::ALL {
            let res = match p {
                Precision::F32 => verify_gpu::<f32>(&g, spec, &a, &Layout::all(), &scheds),
                Precision::F64 => verify_gpu::<f64>(&g, spec, &a, &Layout::all(), &scheds),
            }
            .unwrap_or_else(|e| panic!("{} {p}: {e}", spec.name));
            for c in res {
                n += 1;
                if !c.ok {
                    failures.push(format!(
                        "{} {p} {} {:?}: rel err {:e}",
                        spec.name, c.layout, c.schedule, c.max_rel_err
                    ));
                }
            }
        }
    }
    eprintln!("{n} variants checked, {} failed", failures.len());
    assert_eq!(n, specs.len() * 2 * 16 * scheds.len());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn check_cusparse<T: Scalar + tessera_gpu::cusparse::CusparseScalar>() {
    let Some(_g) = gpu() else { return };
    let rtol = default_rtol(T::PRECISION);
    // complex CSR
    let spec = EntrySpec::builtin("complex").unwrap();
    let a: CsrMatrix<T> = matrix(2).cast();
    let x = test_vector::<T>(a.n_cols, 2, 5);
    let mut cs = CusparseSpmv::csr(
        0, a.n_rows, a.n_cols, &a.row_ptr, &a.col_idx, &a.values, &x, true,
    )
    .unwrap();
    cs.run().unwrap();
    let (err, ok) = compare(
        &cs.result().unwrap(),
        &a.spmv(&spec, &x, Par::Seq),
        &a.spmv_abs(&spec, &x),
        rtol,
    );
    assert!(ok, "cuSPARSE complex CSR {:?}: {err:e}", T::PRECISION);
    // BSR 3x3 of the elasticity matrix
    let spec = EntrySpec::builtin("block3").unwrap();
    let (k, _) = MatrixSource::TetGrid(9, 8, 7).load(&spec).unwrap();
    let k: CsrMatrix<T> = k.cast();
    let x = test_vector::<T>(k.n_cols, 3, 6);
    let mut cs = CusparseSpmv::bsr(
        0, 3, k.n_rows, k.n_cols, &k.row_ptr, &k.col_idx, &k.values, &x,
    )
    .unwrap();
    cs.run().unwrap();
    let (err, ok) = compare(
        &cs.result().unwrap(),
        &k.spmv(&spec, &x, Par::Seq),
        &k.spmv_abs(&spec, &x),
        rtol,
    );
    assert!(ok, "cuSPARSE BSR 3x3 {:?}: {err:e}", T::PRECISION);
    // quaternions as 4x4 real BSR (Eq. 5.1) against the Hamilton-product reference
    let spec = EntrySpec::builtin("quaternion").unwrap();
    let (q, _) = MatrixSource::Sphere(3).load(&spec).unwrap();
    let e: CsrMatrix<T> = expand_quaternion(&q).unwrap().cast();
    let q: CsrMatrix<T> = q.cast();
    let x = test_vector::<T>(q.n_cols, 4, 7);
    let mut cs = CusparseSpmv::bsr(
        0, 4, e.n_rows, e.n_cols, &e.row_ptr, &e.col_idx, &e.values, &x,
    )
    .unwrap();
    cs.run().unwrap();
    let (err, ok) = compare(
        &cs.result().unwrap(),
        &q.spmv(&spec, &x, Par::Seq),
        &q.spmv_abs(&spec, &x),
        rtol,
    );
    assert!(
        ok,
        "cuSPARSE 4x4 BSR quaternion expansion {:?}: {err:e}",
        T::PRECISION
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn cusparse_baselines_match_reference() {
    check_cusparse::<f32>();
    check_cusparse::<f64>();
}
