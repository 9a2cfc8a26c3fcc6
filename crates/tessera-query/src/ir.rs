//! The query IR: a flat SSA list of instructions (each operand refers to an earlier
//! instruction). Lowering from the syntax tree folds constants (in the evaluation precision,
//! with the same math as the back ends), eliminates common subexpressions by hash-consing,
//! strength-reduces `x^n` for small integer `n` to multiplications, and removes dead code.
//! The result is the *normalized IR*; its hash keys the compiled-query cache
//! (dissertation §6.3.4: the optimizing front end shared by the CPU and GPU back ends).

use crate::ast::{BinOp, Expr, ExprKind, Func};
use crate::limits::MAX_POWI;
use crate::math::{powi_chain, Precision, Real};
use std::collections::HashMap;
use std::fmt;

/// Unary operations of the IR.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Un {
    Neg,
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
    Floor,
    Ceil,
}

/// Binary operations of the IR (comparisons give 1.0 / 0.0).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Bin {
    Add,
    Sub,
    Mul,
    Div,
    Pow,
    Atan2,
    Min,
    Max,
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
}

impl Un {
    pub fn name(self) -> &'static str {
        use Un::*;
        match self {
            Neg => "neg",
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
            Floor => "floor",
            Ceil => "ceil",
        }
    }
    /// Whether the op is computed by a library call (CPU JIT) or an approximate sequence (PTX).
    pub fn is_transcendental(self) -> bool {
        !matches!(self, Un::Neg | Un::Abs | Un::Sqrt | Un::Floor | Un::Ceil)
    }
    pub const ALL: [Un; 14] = [
        Un::Neg,
        Un::Abs,
        Un::Sqrt,
        Un::Exp,
        Un::Log,
        Un::Log2,
        Un::Sin,
        Un::Cos,
        Un::Tan,
        Un::Asin,
        Un::Acos,
        Un::Atan,
        Un::Floor,
        Un::Ceil,
    ];
}

impl Bin {
    pub fn name(self) -> &'static str {
        use Bin::*;
        match self {
            Add => "add",
            Sub => "sub",
            Mul => "mul",
            Div => "div",
            Pow => "pow",
            Atan2 => "atan2",
            Min => "min",
            Max => "max",
            Lt => "lt",
            Le => "le",
            Gt => "gt",
            Ge => "ge",
            Eq => "eq",
            Ne => "ne",
        }
    }
    /// Operand order does not change the result bits (IEEE `+`, `*`, `==`, `!=`).
    pub fn is_commutative(self) -> bool {
        matches!(self, Bin::Add | Bin::Mul | Bin::Eq | Bin::Ne)
    }
    pub fn is_comparison(self) -> bool {
        matches!(
            self,
            Bin::Lt | Bin::Le | Bin::Gt | Bin::Ge | Bin::Eq | Bin::Ne
        )
    }
}

/// One IR instruction; operands are indices of earlier instructions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Inst {
    /// A constant, as the bits of an f64 holding a value exactly representable in the precision.
    Const(u64),
    /// Input field number `i` of the caller's field list.
    Field(u32),
    Un(Un, u32),
    Bin(Bin, u32, u32),
    /// `select(c, a, b)`.
    Select(u32, u32, u32),
}

/// A normalized IR program for one precision.
#[derive(Clone, Debug, PartialEq)]
pub struct Ir {
    pub precision: Precision,
    /// Number of fields the caller declared (the kernel's input count).
    pub n_fields: usize,
    pub insts: Vec<Inst>,
    /// The instruction whose value is the result.
    pub result: u32,
}

impl Ir {
    /// Lowers a syntax tree in precision `T`.
    pub fn lower<T: Real>(e: &Expr, n_fields: usize) -> Ir {
        let mut b = Builder::<T> {
            insts: Vec::new(),
            map: HashMap::new(),
            _t: std::marker::PhantomData,
        };
        let r = b.lower(e);
        let ir = Ir {
            precision: T::PRECISION,
            n_fields,
            insts: b.insts,
            result: r,
        };
        ir.canonicalized()
    }

    /// Normal form: only live instructions, in post-order of a walk from the result that
    /// visits the operands of commutative operations in the order of a structural hash of
    /// their subtrees. Equal expressions up to operand order of `+ * == !=` and up to the
    /// order of lowering get identical instruction lists (and hashes).
    fn canonicalized(&self) -> Ir {
        let n = self.insts.len();
        let mut sh = vec![0u64; n];
        for k in 0..n {
            let mut h = Fnv::new();
            match self.insts[k] {
                Inst::Const(b) => {
                    h.byte(1);
                    h.u64(b)
                }
                Inst::Field(f) => {
                    h.byte(2);
                    h.u64(f as u64)
                }
                Inst::Un(op, a) => {
                    h.byte(3);
                    h.byte(op as u8);
                    h.u64(sh[a as usize])
                }
                Inst::Bin(op, a, b) => {
                    let (mut x, mut y) = (sh[a as usize], sh[b as usize]);
                    if op.is_commutative() && x > y {
                        std::mem::swap(&mut x, &mut y);
                    }
                    h.byte(4);
                    h.byte(op as u8);
                    h.u64(x);
                    h.u64(y)
                }
                Inst::Select(c, a, b) => {
                    h.byte(5);
                    h.u64(sh[c as usize]);
                    h.u64(sh[a as usize]);
                    h.u64(sh[b as usize])
                }
            }
            sh[k] = h.0;
        }
        let mut map = vec![u32::MAX; n];
        let mut out = Vec::new();
        fn visit(ir: &Ir, sh: &[u64], k: u32, map: &mut [u32], out: &mut Vec<Inst>) -> u32 {
            if map[k as usize] != u32::MAX {
                return map[k as usize];
            }
            let inst = match ir.insts[k as usize] {
                Inst::Un(op, a) => Inst::Un(op, visit(ir, sh, a, map, out)),
                Inst::Bin(op, a, b) => {
                    let (a, b) = if op.is_commutative() && (sh[a as usize], a) > (sh[b as usize], b)
                    {
                        (b, a)
                    } else {
                        (a, b)
                    };
                    let na = visit(ir, sh, a, map, out);
                    let nb = visit(ir, sh, b, map, out);
                    Inst::Bin(op, na, nb)
                }
                Inst::Select(c, a, b) => {
                    let nc = visit(ir, sh, c, map, out);
                    let na = visit(ir, sh, a, map, out);
                    let nb = visit(ir, sh, b, map, out);
                    Inst::Select(nc, na, nb)
                }
                i => i,
            };
            map[k as usize] = out.len() as u32;
            out.push(inst);
            map[k as usize]
        }
        let result = visit(self, &sh, self.result, &mut map, &mut out);
        Ir {
            precision: self.precision,
            n_fields: self.n_fields,
            insts: out,
            result,
        }
    }

    /// Fields read by the program (sorted).
    pub fn used_fields(&self) -> Vec<u32> {
        let mut v: Vec<u32> = self
            .insts
            .iter()
            .filter_map(|i| {
                if let Inst::Field(f) = i {
                    Some(*f)
                } else {
                    None
                }
            })
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// Value of a constant instruction in f64.
    pub fn const_value(bits: u64) -> f64 {
        f64::from_bits(bits)
    }

    /// 64-bit FNV-1a hash of the normalized IR (precision, field count, instructions). It is
    /// stable across runs and toolchains, so it can name kernels and key on-disk caches.
    pub fn hash64(&self) -> u64 {
        let mut h = Fnv::new();
        h.byte(match self.precision {
            Precision::F32 => 1,
            Precision::F64 => 2,
        });
        h.u64(self.n_fields as u64);
        for i in &self.insts {
            match *i {
                Inst::Const(b) => {
                    h.byte(10);
                    h.u64(b)
                }
                Inst::Field(f) => {
                    h.byte(11);
                    h.u64(f as u64)
                }
                Inst::Un(op, a) => {
                    h.byte(12);
                    h.byte(op as u8);
                    h.u64(a as u64)
                }
                Inst::Bin(op, a, b) => {
                    h.byte(13);
                    h.byte(op as u8);
                    h.u64(a as u64);
                    h.u64(b as u64)
                }
                Inst::Select(c, a, b) => {
                    h.byte(14);
                    h.u64(c as u64);
                    h.u64(a as u64);
                    h.u64(b as u64)
                }
            }
        }
        h.u64(self.result as u64);
        h.0
    }
}

impl fmt::Display for Ir {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "; {} fields, {}, hash {:016x}",
            self.n_fields,
            self.precision.name(),
            self.hash64()
        )?;
        for (k, i) in self.insts.iter().enumerate() {
            match *i {
                Inst::Const(b) => writeln!(f, "v{k} = const {:e}", f64::from_bits(b))?,
                Inst::Field(x) => writeln!(f, "v{k} = field {x}")?,
                Inst::Un(op, a) => writeln!(f, "v{k} = {} v{a}", op.name())?,
                Inst::Bin(op, a, b) => writeln!(f, "v{k} = {} v{a}, v{b}", op.name())?,
                Inst::Select(c, a, b) => writeln!(f, "v{k} = select v{c}, v{a}, v{b}")?,
            }
        }
        writeln!(f, "return v{}", self.result)
    }
}

struct Fnv(u64);
impl Fnv {
    fn new() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
    fn byte(&mut self, b: u8) {
        self.0 ^= b as u64;
        self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
    }
    fn u64(&mut self, v: u64) {
        for b in v.to_le_bytes() {
            self.byte(b)
        }
    }
}

struct Builder<T> {
    insts: Vec<Inst>,
    map: HashMap<Inst, u32>,
    _t: std::marker::PhantomData<T>,
}

impl<T: Real> Builder<T> {
    fn konst(&mut self, v: T) -> u32 {
        self.intern(Inst::Const(v.to_f64().to_bits()))
    }
    fn as_const(&self, r: u32) -> Option<T> {
        match self.insts[r as usize] {
            Inst::Const(b) => Some(T::from_f64(f64::from_bits(b))),
            _ => None,
        }
    }
    fn intern(&mut self, i: Inst) -> u32 {
        // canonical NaN so that every NaN constant is one instruction
        let i = match i {
            Inst::Const(b) if f64::from_bits(b).is_nan() => Inst::Const(f64::NAN.to_bits()),
            i => i,
        };
        if let Some(&r) = self.map.get(&i) {
            return r;
        }
        let r = self.insts.len() as u32;
        self.insts.push(i);
        self.map.insert(i, r);
        r
    }
    fn un(&mut self, op: Un, a: u32) -> u32 {
        if let Some(x) = self.as_const(a) {
            return self.konst(T::un(op, x));
        }
        if op == Un::Neg {
            if let Inst::Un(Un::Neg, inner) = self.insts[a as usize] {
                return inner;
            }
        }
        self.intern(Inst::Un(op, a))
    }
    fn bin(&mut self, op: Bin, a: u32, b: u32) -> u32 {
        let (ca, cb) = (self.as_const(a), self.as_const(b));
        if let (Some(x), Some(y)) = (ca, cb) {
            return self.konst(T::bin(op, x, y));
        }
        // exact identities only (no change of any result bit): x*1, 1*x, x/1, x-(+0), x+(-0)
        let is = |c: Option<T>, v: f64| c.is_some_and(|c| c.to_f64().to_bits() == v.to_bits());
        match op {
            Bin::Mul if is(cb, 1.0) => return a,
            Bin::Mul if is(ca, 1.0) => return b,
            Bin::Div if is(cb, 1.0) => return a,
            // division by a power of two is multiplication by its (exact) reciprocal: both
            // are the correctly rounded value of the same real number
            Bin::Div if cb.is_some_and(|c| exact_reciprocal(c.to_f64()).is_some()) => {
                let r = self.konst(T::from_f64(
                    exact_reciprocal(cb.unwrap().to_f64()).unwrap_or(1.0),
                ));
                let (a, r) = if a > r { (r, a) } else { (a, r) };
                return self.intern(Inst::Bin(Bin::Mul, a, r));
            }
            Bin::Sub if is(cb, 0.0) => return a,
            Bin::Add if is(cb, -0.0) => return a,
            Bin::Add if is(ca, -0.0) => return b,
            _ => {}
        }
        let (a, b) = if op.is_commutative() && a > b {
            (b, a)
        } else {
            (a, b)
        };
        self.intern(Inst::Bin(op, a, b))
    }
    fn select(&mut self, c: u32, a: u32, b: u32) -> u32 {
        if let Some(cv) = self.as_const(c) {
            return if cv != T::zero() { a } else { b };
        }
        if a == b {
            return a;
        }
        self.intern(Inst::Select(c, a, b))
    }
    /// `x^y` with the semantics of [`crate::ast`]: small constant integer exponents become
    /// multiplications by square-and-multiply.
    fn pow(&mut self, x: u32, y: u32, y_is_const: bool) -> u32 {
        if y_is_const {
            if let Some(n) = self.as_const(y).and_then(small_int::<T>) {
                return self.powi(x, n);
            }
        }
        self.bin(Bin::Pow, x, y)
    }
    fn powi(&mut self, x: u32, n: i32) -> u32 {
        if n == 0 {
            return self.konst(T::one());
        }
        let p = powi_chain(x, n.unsigned_abs(), |a, b| self.bin(Bin::Mul, a, b));
        if n < 0 {
            let one = self.konst(T::one());
            self.bin(Bin::Div, one, p)
        } else {
            p
        }
    }
    fn lower(&mut self, e: &Expr) -> u32 {
        match &e.kind {
            ExprKind::Num(v) => self.konst(T::from_f64(*v)),
            ExprKind::Field(i) => self.intern(Inst::Field(*i as u32)),
            ExprKind::Neg(a) => {
                let a = self.lower(a);
                self.un(Un::Neg, a)
            }
            ExprKind::Binary(op, a, b) => {
                let (ra, rb) = (self.lower(a), self.lower(b));
                let op = match op {
                    BinOp::Add => Bin::Add,
                    BinOp::Sub => Bin::Sub,
                    BinOp::Mul => Bin::Mul,
                    BinOp::Div => Bin::Div,
                    BinOp::Pow => return self.pow(ra, rb, b.is_constant()),
                    BinOp::Lt => Bin::Lt,
                    BinOp::Le => Bin::Le,
                    BinOp::Gt => Bin::Gt,
                    BinOp::Ge => Bin::Ge,
                    BinOp::Eq => Bin::Eq,
                    BinOp::Ne => Bin::Ne,
                };
                self.bin(op, ra, rb)
            }
            ExprKind::Call(f, args) => {
                let r: Vec<u32> = args.iter().map(|a| self.lower(a)).collect();
                let un = |op| (op, r[0]);
                let (op, a) = match f {
                    Func::Abs => un(Un::Abs),
                    Func::Sqrt => un(Un::Sqrt),
                    Func::Exp => un(Un::Exp),
                    Func::Log => un(Un::Log),
                    Func::Log2 => un(Un::Log2),
                    Func::Sin => un(Un::Sin),
                    Func::Cos => un(Un::Cos),
                    Func::Tan => un(Un::Tan),
                    Func::Asin => un(Un::Asin),
                    Func::Acos => un(Un::Acos),
                    Func::Atan => un(Un::Atan),
                    Func::Floor => un(Un::Floor),
                    Func::Ceil => un(Un::Ceil),
                    Func::Atan2 => return self.bin(Bin::Atan2, r[0], r[1]),
                    Func::Min => return self.bin(Bin::Min, r[0], r[1]),
                    Func::Max => return self.bin(Bin::Max, r[0], r[1]),
                    Func::Pow => return self.pow(r[0], r[1], args[1].is_constant()),
                    Func::Clamp => {
                        let lo = self.bin(Bin::Max, r[0], r[1]);
                        return self.bin(Bin::Min, lo, r[2]);
                    }
                    Func::Select => return self.select(r[0], r[1], r[2]),
                };
                self.un(op, a)
            }
        }
    }
}

/// `1/c` when `c` is a power of two whose reciprocal is a normal f32 (so exact in both precisions).
fn exact_reciprocal(c: f64) -> Option<f64> {
    let r = 1.0 / c;
    let is_pow2 = c != 0.0 && c.is_finite() && (c.abs().to_bits() & ((1u64 << 52) - 1)) == 0;
    (is_pow2 && r.abs() >= f32::MIN_POSITIVE as f64 && r.abs() <= f32::MAX as f64).then_some(r)
}

/// The integer `n` with `|n| <= MAX_POWI` equal to `v`, if any.
pub fn small_int<T: Real>(v: T) -> Option<i32> {
    let f = v.to_f64();
    if f.is_finite() && f == f.trunc() && f.abs() <= MAX_POWI as f64 {
        Some(f as i32)
    } else {
        None
    }
}
