//! The reference evaluator: a plain recursive walk of the syntax tree, one element at a
//! time. It defines the semantics every back end must reproduce (DESIGN.md principle 1).
//! It shares only the scalar math of [`crate::math`] with the back ends, not the IR.

use crate::ast::{BinOp, Expr, ExprKind, Func};
use crate::ir::{small_int, Bin, Un};
use crate::math::{powi_chain, select, Real};

/// Value of `e` for one element; `x[i]` is the value of field `i`.
pub fn eval<T: Real>(e: &Expr, x: &[T]) -> T {
    match &e.kind {
        ExprKind::Num(v) => T::from_f64(*v),
        ExprKind::Field(i) => x[*i],
        ExprKind::Neg(a) => T::un(Un::Neg, eval(a, x)),
        ExprKind::Binary(op, a, b) => {
            let (va, vb) = (eval(a, x), eval(b, x));
            let op = match op {
                BinOp::Add => Bin::Add,
                BinOp::Sub => Bin::Sub,
                BinOp::Mul => Bin::Mul,
                BinOp::Div => Bin::Div,
                BinOp::Pow => return pow(va, vb, b.is_constant()),
                BinOp::Lt => Bin::Lt,
                BinOp::Le => Bin::Le,
                BinOp::Gt => Bin::Gt,
                BinOp::Ge => Bin::Ge,
                BinOp::Eq => Bin::Eq,
                BinOp::Ne => Bin::Ne,
            };
            T::bin(op, va, vb)
        }
        ExprKind::Call(f, args) => {
            let v: Vec<T> = args.iter().map(|a| eval(a, x)).collect();
            let u = |op| T::un(op, v[0]);
            match f {
                Func::Abs => u(Un::Abs),
                Func::Sqrt => u(Un::Sqrt),
                Func::Exp => u(Un::Exp),
                Func::Log => u(Un::Log),
                Func::Log2 => u(Un::Log2),
                Func::Sin => u(Un::Sin),
                Func::Cos => u(Un::Cos),
                Func::Tan => u(Un::Tan),
                Func::Asin => u(Un::Asin),
                Func::Acos => u(Un::Acos),
                Func::Atan => u(Un::Atan),
                Func::Floor => u(Un::Floor),
                Func::Ceil => u(Un::Ceil),
                Func::Atan2 => T::bin(Bin::Atan2, v[0], v[1]),
                Func::Min => T::bin(Bin::Min, v[0], v[1]),
                Func::Max => T::bin(Bin::Max, v[0], v[1]),
                Func::Pow => pow(v[0], v[1], args[1].is_constant()),
                Func::Clamp => T::bin(Bin::Min, T::bin(Bin::Max, v[0], v[1]), v[2]),
                Func::Select => select(v[0], v[1], v[2]),
            }
        }
    }
}

fn pow<T: Real>(x: T, y: T, y_is_const: bool) -> T {
    if y_is_const {
        if let Some(n) = small_int(y) {
            if n == 0 {
                return T::one();
            }
            let p = powi_chain(x, n.unsigned_abs(), |a, b| T::bin(Bin::Mul, a, b));
            return if n < 0 {
                T::bin(Bin::Div, T::one(), p)
            } else {
                p
            };
        }
    }
    T::bin(Bin::Pow, x, y)
}

/// Evaluates `e` over whole arrays (`fields[i][k]` is field `i` at element `k`).
pub fn eval_array<T: Real>(e: &Expr, fields: &[&[T]], out: &mut [T]) {
    let mut x = vec![T::zero(); fields.len()];
    for (k, o) in out.iter_mut().enumerate() {
        for (xi, f) in x.iter_mut().zip(fields) {
            *xi = f[k];
        }
        *o = eval(e, &x);
    }
}
