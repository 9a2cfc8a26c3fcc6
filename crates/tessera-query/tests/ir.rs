//! The optimizing front end: constant folding, CSE, `x^n` strength reduction, the
//! normalized-IR hash as cache key (dissertation §6.3.4).

use tessera_query::ir::{Bin, Inst, Un};
use tessera_query::{Precision, Query};

fn ir(e: &str, f: &[&str]) -> tessera_query::Ir {
    Query::compile(e, f).unwrap().ir(Precision::F32).clone()
}

#[test]
fn constants_fold_in_the_evaluation_precision() {
    let i = ir("2*pi + sqrt(16) - 2^3", &[]);
    assert_eq!(i.insts.len(), 1);
    let Inst::Const(b) = i.insts[0] else {
        panic!("{i}")
    };
    let want = (2.0f32 * std::f32::consts::PI + 4.0 - 8.0) as f64;
    assert_eq!(f64::from_bits(b), want);
    // select with a constant condition picks a branch
    let i = ir("select(1 < 2, a, b)", &["a", "b"]);
    assert_eq!(i.insts, vec![Inst::Field(0)]);
}

#[test]
fn common_subexpressions_are_shared() {
    // VelocityX^2 appears twice (once as pow); one multiplication each for x^2 and y^2
    let i = ir("sqrt(x^2 + y^2) + pow(x, 2) * (y*y)", &["x", "y"]);
    let muls = i
        .insts
        .iter()
        .filter(|k| matches!(k, Inst::Bin(Bin::Mul, ..)))
        .count();
    assert_eq!(muls, 3, "{i}"); // x*x, y*y, (x*x)*(y*y)
                                // commutative operands are put in a canonical order, so a+b and b+a are one value
    let i = ir("(a+b) - (b+a)", &["a", "b"]);
    assert_eq!(
        i.insts
            .iter()
            .filter(|k| matches!(k, Inst::Bin(Bin::Add, ..)))
            .count(),
        1,
        "{i}"
    );
}

#[test]
fn small_integer_powers_become_multiplications() {
    let i = ir("x^5", &["x"]);
    assert!(
        !i.insts.iter().any(|k| matches!(k, Inst::Bin(Bin::Pow, ..))),
        "{i}"
    );
    assert_eq!(
        i.insts
            .iter()
            .filter(|k| matches!(k, Inst::Bin(Bin::Mul, ..)))
            .count(),
        3,
        "{i}"
    ); // x2, x4, x4*x
    let i = ir("x^-2", &["x"]);
    assert!(
        i.insts.iter().any(|k| matches!(k, Inst::Bin(Bin::Div, ..))),
        "{i}"
    );
    let i = ir("x^(1+1)", &["x"]);
    assert!(
        !i.insts.iter().any(|k| matches!(k, Inst::Bin(Bin::Pow, ..))),
        "{i}"
    );
    // non-integer or large exponents keep pow
    assert!(ir("x^0.5", &["x"])
        .insts
        .iter()
        .any(|k| matches!(k, Inst::Bin(Bin::Pow, ..))));
    assert!(ir("x^17", &["x"])
        .insts
        .iter()
        .any(|k| matches!(k, Inst::Bin(Bin::Pow, ..))));
    assert!(ir("x^y", &["x", "y"])
        .insts
        .iter()
        .any(|k| matches!(k, Inst::Bin(Bin::Pow, ..))));
    // x^0 = 1 and x^1 = x
    assert_eq!(ir("x^0", &["x"]).insts.len(), 1);
    assert_eq!(ir("x^1", &["x"]).insts, vec![Inst::Field(0)]);
}

#[test]
fn dead_code_and_exact_identities() {
    let i = ir("x*1 + 0*0 - -(-y)", &["x", "y"]);
    // x*1 -> x; 0*0 folds to 0 (x + 0 is NOT simplified: -0 + 0 = +0); --y -> y
    assert!(
        i.insts.iter().all(|k| !matches!(k, Inst::Un(Un::Neg, _))),
        "{i}"
    );
    assert!(
        i.insts
            .iter()
            .all(|k| !matches!(k, Inst::Bin(Bin::Mul, ..))),
        "{i}"
    );
}

#[test]
fn cache_key_is_the_normalized_ir() {
    let h = |e: &str, f: &[&str]| Query::compile(e, f).unwrap().hash(Precision::F32);
    assert_eq!(h("a + b", &["a", "b"]), h("b + a", &["a", "b"]));
    assert_eq!(
        h("(VelocityX^2+VelocityY^2)", &["VelocityX", "VelocityY"]),
        h("u*u + v*v", &["u", "v"])
    );
    assert_ne!(h("a - b", &["a", "b"]), h("b - a", &["a", "b"]));
    let q = Query::compile("a + b", &["a", "b"]).unwrap();
    assert_ne!(q.hash(Precision::F32), q.hash(Precision::F64));
    // two queries with the same normalized IR share one compiled JIT kernel
    let q1 = Query::compile("sin(p) * 3 + q", &["p", "q"]).unwrap();
    let q2 = Query::compile("q + 3*sin(p)", &["p", "q"]).unwrap();
    let k1 = q1.jit(Precision::F64).unwrap();
    let k2 = q2.jit(Precision::F64).unwrap();
    assert!(std::sync::Arc::ptr_eq(k1, k2));
}

#[test]
fn ir_display_is_readable() {
    let s = ir("sqrt(VelocityX^2+VelocityY^2)", &["VelocityX", "VelocityY"]).to_string();
    assert!(
        s.contains("= mul v0, v0") && s.contains("sqrt") && s.contains("return v"),
        "{s}"
    );
}
