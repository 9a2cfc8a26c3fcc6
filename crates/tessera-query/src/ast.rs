//! The query language (dissertation §6.3.4): field identifiers, numeric literals, `+ - * / ^`,
//! unary minus, parentheses, comparisons, the functions of [`FUNCTION_NAMES`], the constants
//! `pi` and `e`, and `select(c, a, b)` for masking. It has no loops, assignments or calls
//! other than pure math ("safe by design", §6.3.4); the only resources an expression can
//! claim are bounded by the limits in [`crate::limits`].
//!
//! Semantics (shared by every back end; the reference evaluator in [`crate::reference`]
//! is the definition):
//! - all values are floats of the evaluation precision (f32 or f64);
//! - comparisons give 1.0 (true) or 0.0 (false) with IEEE rules (any NaN operand: false,
//!   except `!=` which is true); `select(c, a, b)` is `a` where `c != 0` (NaN counts as
//!   nonzero) and `b` elsewhere;
//! - `min(a, b)` is `b` if `b < a` or `a` is NaN, else `a`; `max(a, b)` is `b` if `b > a`
//!   or `a` is NaN, else `a`; `clamp(x, lo, hi) = min(max(x, lo), hi)`;
//! - `x ^ y` and `pow(x, y)`: when `y` is a constant expression whose value is an integer
//!   `n` with `|n| <= 16`, the result is `x` multiplied by itself by square-and-multiply
//!   ([`crate::math::powi_chain`]), and `1 / x^|n|` for negative `n`; otherwise `powf`;
//! - `^` binds tighter than unary minus and is right-associative: `-x^2 = -(x^2)`,
//!   `a^b^c = a^(b^c)`.

use crate::error::Span;

/// Unary and binary operators of the syntax tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Pow,
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
}

/// The built-in functions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Func {
    Abs,
    Sqrt,
    Exp,
    Log,
    Log2,
    Sin,
    Cos,
    Tan,
    Asin,
    Acos,
    Atan,
    Atan2,
    Min,
    Max,
    Pow,
    Clamp,
    Floor,
    Ceil,
    Select,
}

/// Names of the built-in functions, in the order users see them in error messages.
pub const FUNCTION_NAMES: &[&str] = &[
    "abs", "sqrt", "exp", "log", "log2", "sin", "cos", "tan", "asin", "acos", "atan", "atan2",
    "min", "max", "pow", "clamp", "floor", "ceil", "select",
];

/// Names of the built-in constants.
pub const CONSTANT_NAMES: &[&str] = &["pi", "e"];

impl Func {
    pub fn from_name(s: &str) -> Option<Func> {
        use Func::*;
        Some(match s {
            "abs" => Abs,
            "sqrt" => Sqrt,
            "exp" => Exp,
            "log" => Log,
            "log2" => Log2,
            "sin" => Sin,
            "cos" => Cos,
            "tan" => Tan,
            "asin" => Asin,
            "acos" => Acos,
            "atan" => Atan,
            "atan2" => Atan2,
            "min" => Min,
            "max" => Max,
            "pow" => Pow,
            "clamp" => Clamp,
            "floor" => Floor,
            "ceil" => Ceil,
            "select" => Select,
            _ => return None,
        })
    }
    pub fn name(self) -> &'static str {
        use Func::*;
        match self {
            Abs => "abs",
            Sqrt => "sqrt",
            Exp => "exp",
            Log => "log",
            Log2 => "log2",
            Sin => "sin",
            Cos => "cos",
            Tan => "tan",
            Asin => "asin",
            Acos => "acos",
            Atan => "atan",
            Atan2 => "atan2",
            Min => "min",
            Max => "max",
            Pow => "pow",
            Clamp => "clamp",
            Floor => "floor",
            Ceil => "ceil",
            Select => "select",
        }
    }
    pub fn arity(self) -> usize {
        use Func::*;
        match self {
            Atan2 | Min | Max | Pow => 2,
            Clamp | Select => 3,
            _ => 1,
        }
    }
}

/// A node of the syntax tree with the byte span of the text it came from.
#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
    /// Depth of the subtree rooted here (a leaf has depth 1).
    pub depth: u32,
}

#[derive(Clone, Debug, PartialEq)]
pub enum ExprKind {
    /// A numeric literal or a named constant (`pi`, `e`), as f64.
    Num(f64),
    /// The i-th field of the caller's field list.
    Field(usize),
    /// Unary minus.
    Neg(Box<Expr>),
    Binary(BinOp, Box<Expr>, Box<Expr>),
    Call(Func, Vec<Expr>),
}

impl Expr {
    /// Whether the subtree contains no field (its value is known at compile time).
    pub fn is_constant(&self) -> bool {
        match &self.kind {
            ExprKind::Num(_) => true,
            ExprKind::Field(_) => false,
            ExprKind::Neg(a) => a.is_constant(),
            ExprKind::Binary(_, a, b) => a.is_constant() && b.is_constant(),
            ExprKind::Call(_, args) => args.iter().all(|a| a.is_constant()),
        }
    }
}
