//! Shared helpers of the tests: a random well-formed expression generator, random inputs
//! with special values, and the stated comparison tolerance.
#![allow(dead_code)]

use proptest::prelude::*;

pub const FIELDS: [&str; 3] = ["a", "b", "c"];

/// Random well-formed expressions over `a`, `b`, `c` using every construct of the language.
pub fn expr_strategy() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        3 => prop::sample::select(vec!["a", "b", "c"]).prop_map(|s| s.to_string()),
        2 => prop::sample::select(vec!["0", "0.5", "1", "2", "3", "1.5", "10", "0.1", "1e-3", "7.25", "pi", "e", "2.5e1"])
            .prop_map(|s| s.to_string()),
    ];
    leaf.prop_recursive(5, 40, 3, |inner| {
        let un = prop::sample::select(vec![
            "abs", "sqrt", "exp", "log", "log2", "sin", "cos", "tan", "asin", "acos", "atan", "floor", "ceil",
        ]);
        let bin_fn = prop::sample::select(vec!["atan2", "min", "max", "pow"]);
        let op = prop::sample::select(vec!["+", "-", "*", "/", "^", "<", "<=", ">", ">=", "==", "!="]);
        let small_exp = prop::sample::select(vec!["2", "3", "-1", "-2", "0", "4", "1", "5", "16", "(1+1)", "0.5", "-3"]);
        prop_oneof![
            4 => (inner.clone(), op, inner.clone()).prop_map(|(a, o, b)| format!("({a} {o} {b})")),
            2 => (un, inner.clone()).prop_map(|(f, a)| format!("{f}({a})")),
            1 => (bin_fn, inner.clone(), inner.clone()).prop_map(|(f, a, b)| format!("{f}({a}, {b})")),
            1 => (inner.clone(), small_exp).prop_map(|(a, n)| format!("{a}^{n}")),
            1 => inner.clone().prop_map(|a| format!("-{a}")),
            1 => (inner.clone(), inner.clone(), inner.clone()).prop_map(|(a, b, c)| format!("select({a}, {b}, {c})")),
            1 => (inner.clone(), inner.clone(), inner.clone()).prop_map(|(a, b, c)| format!("clamp({a}, {b}, {c})")),
        ]
    })
}

/// One random input value: mostly moderate, sometimes special (0, -0, ±inf, NaN, huge, tiny).
pub fn value(r: &mut u64) -> f64 {
    *r ^= *r << 13;
    *r ^= *r >> 7;
    *r ^= *r << 17;
    let u = (*r >> 11) as f64 / (1u64 << 53) as f64;
    let k = (*r & 63) as u32;
    match k {
        0 => 0.0,
        1 => -0.0,
        2 => f64::INFINITY,
        3 => f64::NEG_INFINITY,
        4 => f64::NAN,
        5 => 1e30 * (u - 0.5),
        6 => 1e-30 * (u - 0.5),
        7 => (u * 20.0 - 10.0).round(),
        _ => u * 8.0 - 4.0,
    }
}

/// Columns of `n` random values for `nf` fields.
pub fn inputs(seed: u64, nf: usize, n: usize) -> Vec<Vec<f64>> {
    let mut r = seed | 1;
    (0..nf)
        .map(|_| (0..n).map(|_| value(&mut r)).collect())
        .collect()
}

/// Stated tolerance of the CPU differential tests: equal bits, or both NaN, or a relative
/// difference of at most `rel` (the CPU back ends are expected to agree exactly; the
/// tolerance only covers libm differences a platform might have between call sites).
pub fn close(a: f64, b: f64, rel: f64) -> bool {
    (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= rel * a.abs().max(b.abs())
}

/// Equal bits or both NaN (signed zeros must match too).
pub fn same(a: f64, b: f64) -> bool {
    (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits()
}
