//! Differential tests (issue 8): on thousands of random well-formed expressions over random
//! inputs (including 0, -0, ±inf, NaN), the interpreter, the Cranelift JIT and the recursive
//! reference evaluator agree. Interpreter and JIT must agree bit for bit (NaN == NaN);
//! against the reference the stated tolerance is a relative 1e-6 (f32) / 1e-13 (f64).

mod common;
use common::*;
use proptest::prelude::*;
use tessera_query::{Backend, Par, Query};

fn check(expr: &str, seed: u64, n: usize) -> Result<(), TestCaseError> {
    let q =
        Query::compile(expr, &FIELDS).map_err(|e| TestCaseError::fail(format!("{expr}: {e}")))?;
    let cols = inputs(seed, 3, n);
    // f64
    {
        let f: Vec<&[f64]> = cols.iter().map(|c| c.as_slice()).collect();
        let (mut r, mut i, mut j, mut jp) =
            (vec![0.0; n], vec![0.0; n], vec![0.0; n], vec![0.0; n]);
        q.eval_reference(&f, &mut r).unwrap();
        q.eval_cpu_with(Backend::Interp, Par::Seq, &f, &mut i)
            .unwrap();
        q.eval_cpu_with(Backend::CpuJit, Par::Seq, &f, &mut j)
            .unwrap();
        q.eval_cpu_with(Backend::CpuJit, Par::Rayon, &f, &mut jp)
            .unwrap();
        for k in 0..n {
            let x = (cols[0][k], cols[1][k], cols[2][k]);
            prop_assert!(
                same(i[k], j[k]),
                "f64 interp {} vs jit {} for {expr} at {x:?}",
                i[k],
                j[k]
            );
            prop_assert!(same(j[k], jp[k]), "f64 Seq vs Rayon differ for {expr}");
            prop_assert!(
                close(r[k], i[k], 1e-13),
                "f64 reference {} vs interp {} for {expr} at {x:?}",
                r[k],
                i[k]
            );
        }
    }
    // f32
    {
        let c32: Vec<Vec<f32>> = cols
            .iter()
            .map(|c| c.iter().map(|&v| v as f32).collect())
            .collect();
        let f: Vec<&[f32]> = c32.iter().map(|c| c.as_slice()).collect();
        let (mut r, mut i, mut j) = (vec![0.0f32; n], vec![0.0f32; n], vec![0.0f32; n]);
        q.eval_reference(&f, &mut r).unwrap();
        q.eval_cpu_with(Backend::Interp, Par::Rayon, &f, &mut i)
            .unwrap();
        q.eval_cpu(&f, &mut j).unwrap();
        for k in 0..n {
            let x = (c32[0][k], c32[1][k], c32[2][k]);
            prop_assert!(
                same(i[k] as f64, j[k] as f64),
                "f32 interp {} vs jit {} for {expr} at {x:?}",
                i[k],
                j[k]
            );
            prop_assert!(
                close(r[k] as f64, i[k] as f64, 1e-6),
                "f32 reference {} vs interp {} for {expr} at {x:?}",
                r[k],
                i[k]
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, max_shrink_iters: 2000, ..ProptestConfig::default() })]
    #[test]
    fn interp_jit_and_reference_agree(expr in expr_strategy(), seed in any::<u64>(), n in 1usize..40) {
        check(&expr, seed, n)?;
    }
}

#[test]
fn examples_of_section_6_4_3_agree_on_a_grid() {
    for e in [
        "abs(Pressure)",
        "sqrt(VelocityX^2+VelocityY^2)",
        "(VelocityX^2+VelocityY^2)/2 + Pressure",
    ] {
        let q = Query::compile(e, &["VelocityX", "VelocityY", "Pressure"]).unwrap();
        let n = 10_007; // not a multiple of the SIMD width or the interpreter chunk
        let cols: Vec<Vec<f32>> = (0..3)
            .map(|f| {
                (0..n)
                    .map(|k| ((k * 7 + f * 13) % 101) as f32 * 0.37 - 18.0)
                    .collect()
            })
            .collect();
        let f: Vec<&[f32]> = cols.iter().map(|c| c.as_slice()).collect();
        let (mut r, mut i, mut j) = (vec![0.0; n], vec![0.0; n], vec![0.0; n]);
        q.eval_reference(&f, &mut r).unwrap();
        q.eval_cpu_with(Backend::Interp, Par::Seq, &f, &mut i)
            .unwrap();
        q.eval_cpu(&f, &mut j).unwrap();
        assert_eq!(r, i, "{e}");
        assert_eq!(r, j, "{e}");
        assert!(
            q.jit(tessera_query::Precision::F32).unwrap().vectorized,
            "{e}: expected the SIMD loop"
        );
    }
}

#[test]
fn special_values_follow_the_documented_semantics() {
    let q = Query::compile("select(a, min(b, c), max(b, c)) + (a != a)", &FIELDS).unwrap();
    let nan = f32::NAN;
    let a = [nan, 0.0, -0.0, 1.0];
    let b = [1.0, nan, 2.0, 3.0];
    let c = [2.0, 5.0, nan, 4.0];
    for backend in [Backend::Interp, Backend::CpuJit] {
        let mut o = [0.0f32; 4];
        q.eval_cpu_with(backend, Par::Seq, &[&a, &b, &c], &mut o)
            .unwrap();
        // NaN condition selects the first branch; min/max return the non-NaN operand
        assert_eq!(o, [2.0, 5.0, 2.0, 3.0], "{backend:?}");
    }
}
