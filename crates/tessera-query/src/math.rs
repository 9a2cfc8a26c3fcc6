//! Scalar math shared by the reference evaluator, constant folding, the interpreter and the
//! CPU JIT's call-outs, so that all CPU paths compute bit-identical results (the semantics
//! are documented in [`crate::ast`]).

use crate::ir::{Bin, Un};

/// The float types a query can be evaluated in.
pub trait Real: Copy + PartialOrd + PartialEq + Send + Sync + std::fmt::Debug + 'static {
    const PRECISION: Precision;
    fn from_f64(v: f64) -> Self;
    fn to_f64(self) -> f64;
    fn un(op: Un, a: Self) -> Self;
    fn bin(op: Bin, a: Self, b: Self) -> Self;
    fn zero() -> Self;
    fn one() -> Self;
    fn is_nan(self) -> bool;
}

/// Evaluation precision.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Precision {
    #[default]
    F32,
    F64,
}

impl Precision {
    pub fn name(self) -> &'static str {
        match self {
            Precision::F32 => "f32",
            Precision::F64 => "f64",
        }
    }
    pub fn bytes(self) -> usize {
        match self {
            Precision::F32 => 4,
            Precision::F64 => 8,
        }
    }
}

/// `select(c, a, b)`: `a` where `c != 0` (NaN counts as nonzero), else `b`.
#[inline(always)]
pub fn select<T: Real>(c: T, a: T, b: T) -> T {
    if c != T::zero() {
        a
    } else {
        b
    }
}

/// `x^n` for a positive integer `n` by square-and-multiply. `mul` is called in exactly the
/// order the IR lowering uses, so the reference evaluator and every back end agree bit for bit.
pub fn powi_chain<V: Clone>(x: V, n: u32, mut mul: impl FnMut(V, V) -> V) -> V {
    debug_assert!(n >= 1);
    let mut base = x;
    let mut acc: Option<V> = None;
    let mut n = n;
    loop {
        if n & 1 == 1 {
            acc = Some(match acc {
                None => base.clone(),
                Some(a) => mul(a, base.clone()),
            });
        }
        n >>= 1;
        if n == 0 {
            break;
        }
        base = mul(base.clone(), base);
    }
    acc.expect("n >= 1")
}

macro_rules! impl_real {
    ($t:ty, $p:expr) => {
        impl Real for $t {
            const PRECISION: Precision = $p;
            #[inline(always)]
            fn from_f64(v: f64) -> Self {
                v as $t
            }
            #[inline(always)]
            fn to_f64(self) -> f64 {
                self as f64
            }
            #[inline(always)]
            fn zero() -> Self {
                0.0
            }
            #[inline(always)]
            fn one() -> Self {
                1.0
            }
            #[inline(always)]
            fn is_nan(self) -> bool {
                <$t>::is_nan(self)
            }
            #[inline(always)]
            fn un(op: Un, a: Self) -> Self {
                match op {
                    Un::Neg => -a,
                    Un::Abs => a.abs(),
                    Un::Sqrt => a.sqrt(),
                    Un::Exp => a.exp(),
                    Un::Log => a.ln(),
                    Un::Log2 => a.log2(),
                    Un::Sin => a.sin(),
                    Un::Cos => a.cos(),
                    Un::Tan => a.tan(),
                    Un::Asin => a.asin(),
                    Un::Acos => a.acos(),
                    Un::Atan => a.atan(),
                    Un::Floor => a.floor(),
                    Un::Ceil => a.ceil(),
                }
            }
            #[inline(always)]
            fn bin(op: Bin, a: Self, b: Self) -> Self {
                let t = |c: bool| if c { 1.0 } else { 0.0 };
                match op {
                    Bin::Add => a + b,
                    Bin::Sub => a - b,
                    Bin::Mul => a * b,
                    Bin::Div => a / b,
                    Bin::Pow => a.powf(b),
                    Bin::Atan2 => a.atan2(b),
                    Bin::Min => {
                        if b < a || a.is_nan() {
                            b
                        } else {
                            a
                        }
                    }
                    Bin::Max => {
                        if b > a || a.is_nan() {
                            b
                        } else {
                            a
                        }
                    }
                    Bin::Lt => t(a < b),
                    Bin::Le => t(a <= b),
                    Bin::Gt => t(a > b),
                    Bin::Ge => t(a >= b),
                    Bin::Eq => t(a == b),
                    Bin::Ne => t(a != b),
                }
            }
        }
    };
}
impl_real!(f32, Precision::F32);
impl_real!(f64, Precision::F64);

/// Call-outs of the CPU JIT for transcendental functions: the same Rust functions the
/// interpreter uses (so the two agree bit for bit).
pub(crate) mod callout {
    macro_rules! un {
        ($($name:ident, $t:ty, $m:ident;)*) => { $(pub extern "C" fn $name(x: $t) -> $t { x.$m() })* };
    }
    macro_rules! bin {
        ($($name:ident, $t:ty, $m:ident;)*) => { $(pub extern "C" fn $name(x: $t, y: $t) -> $t { x.$m(y) })* };
    }
    un! {
        exp_f32, f32, exp; log_f32, f32, ln; log2_f32, f32, log2; sin_f32, f32, sin; cos_f32, f32, cos;
        tan_f32, f32, tan; asin_f32, f32, asin; acos_f32, f32, acos; atan_f32, f32, atan;
        exp_f64, f64, exp; log_f64, f64, ln; log2_f64, f64, log2; sin_f64, f64, sin; cos_f64, f64, cos;
        tan_f64, f64, tan; asin_f64, f64, asin; acos_f64, f64, acos; atan_f64, f64, atan;
    }
    bin! {
        pow_f32, f32, powf; atan2_f32, f32, atan2; pow_f64, f64, powf; atan2_f64, f64, atan2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn powi_chain_matches_repeated_multiplication_order() {
        // x^5 = x * (x^2)^2 in square-and-multiply order
        let r = powi_chain(3.0f64, 5, |a, b| a * b);
        assert_eq!(r, 243.0);
        let mut trace = Vec::new();
        powi_chain(1u32, 6, |a, b| {
            trace.push((a, b));
            a + b
        });
        // 6 = 0b110: square (1+1=2), acc=2, square (2+2=4), acc=2+4
        assert_eq!(trace, vec![(1, 1), (2, 2), (2, 4)]);
    }
    #[test]
    fn min_max_nan_semantics() {
        assert_eq!(f32::bin(Bin::Min, f32::NAN, 2.0), 2.0);
        assert_eq!(f32::bin(Bin::Min, 2.0, f32::NAN), 2.0);
        assert_eq!(f32::bin(Bin::Max, 1.0, 3.0), 3.0);
        assert!(f32::bin(Bin::Max, f32::NAN, f32::NAN).is_nan());
        assert_eq!(select(f32::NAN, 1.0, 2.0), 1.0);
        assert_eq!(select(0.0f32, 1.0, 2.0), 2.0);
        assert_eq!(select(-0.0f32, 1.0, 2.0), 2.0);
    }
}
