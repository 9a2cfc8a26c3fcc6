//! GPU back end: PTX text emitted directly from the normalized IR (the dissertation used
//! LLVM's NVPTX target and linked `libdevice`, which cost 77 ms per query, §6.4.3; writing
//! PTX ourselves needs no libdevice and compiles in microseconds). The driver JIT-compiles
//! the PTX when `tessera-gpu` loads it (through its kernel cache).
//!
//! Kernel: `tq_<hash>(in0, .., in{F-1}, out, n)` (u64 pointers, u64 count), a grid-stride loop,
//! one element per thread per iteration. Operations and their accuracy (ulp = unit in the
//! last place of the result; measured by the `*_matches_reference` GPU tests):
//!
//! | op | f32 | f64 |
//! |----|-----|-----|
//! | `+ - * /`, `sqrt` | `add.rn/sub.rn/mul.rn` (no FMA contraction), `div.rn`, `sqrt.rn`: correctly rounded, bit-identical to the CPU | same |
//! | `abs`, unary `-`, `floor`, `ceil` | `abs`, `neg`, `cvt.rmi`, `cvt.rpi`: exact | same |
//! | comparisons, `select`, `min`, `max` | `setp` + `selp` with the NaN rules of [`crate::ast`]: exact | same |
//! | `exp` | Cody-Waite reduction `x = n ln2 + r`, `ex2.approx(r log2e) * 2^n`: ≤ 4 ulp (measured 3.7 on H100) | reduction + degree-13 Taylor polynomial, scale by exponent bits: ≤ 4 ulp (measured 1.0) |
//! | `log`, `log2` | `lg2.approx` (abs. error 2^-22) with a log1p series for `|x-1| < 1/16`: ≤ 4 ulp or 2^-21 absolute (measured up to 26 ulp where the absolute bound applies) | exponent split, `atanh` series in `(m-1)/(m+1)`: ≤ 4 ulp (measured 3.0) |
//! | `sin`, `cos` | reduction by 2π (3 constants), `sin.approx`/`cos.approx`: absolute error ≤ 2^-19 for `|x| ≤ 1e4` (sine: Taylor polynomial for reduced `|r| < 1/4`, relative accuracy near 0) | reduction by π/2 (3 constants, FMA), Taylor polynomials: ≤ 4 ulp + 2e-16 absolute for `|x| ≤ 1e15`; beyond, no Payne-Hanek reduction: sin 0, cos 1 (finite, inaccurate) |
//! | `tan` | `sin / cos` of the above: absolute error ≤ 2^-19 (1 + tan²) | ≤ (4 ulp + 2e-16)(1 + tan²) |
//! | `atan`, `atan2`, `asin`, `acos` | two-step reduction to `|t| ≤ tan(π/12)`, odd Taylor polynomial; `asin = atan2(x, sqrt((1-x)(1+x)))`: ≤ 4 ulp (measured 2.7) | same with more terms: ≤ 8 ulp (measured 3.0) |
//! | `pow` (non-constant exponent) | evaluated in f64 (`exp(y log|x|)` with C99 special cases) and rounded: ≤ 1 ulp (measured 0.5) | `exp(y log|x|)`: relative error ≤ 4e-16·(2 + |y ln x|) (measured 84 ulp at `y ln x ≈ 78`) |
//!
//! Signed-zero results of `atan`/`atan2` with zero operands may differ in sign from libm.

use crate::ir::{Bin, Inst, Ir, Un};
use crate::math::Precision;
use std::fmt::Write;

/// A generated PTX module.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PtxModule {
    /// The kernel's entry name (`tq_` + the IR hash).
    pub name: String,
    pub text: String,
}

/// Kernel name for an IR: `tq_<16 hex digits of the normalized-IR hash>`.
pub fn kernel_name(ir: &Ir) -> String {
    format!("tq_{:016x}", ir.hash64())
}

/// Target architecture of [`emit`]: `sm_75`, the oldest one CUDA 13 still supports (the
/// driver JIT-compiles the PTX for the actual device).
pub const DEFAULT_SM: u32 = 75;

/// Emits the PTX module for `ir` for [`DEFAULT_SM`] (deterministic: same IR, same bytes).
pub fn emit(ir: &Ir) -> PtxModule {
    emit_for(ir, DEFAULT_SM)
}

/// Emits the PTX module for `ir` with `.target sm_<sm>` (PTX ISA 8.0).
pub fn emit_for(ir: &Ir, sm: u32) -> PtxModule {
    let name = kernel_name(ir);
    let mut e = Emitter::new(ir.precision);
    let t = e.t;
    let sz = ir.precision.bytes();
    // prologue
    e.i("ld.param.u64 %rd1, [tq_n]".into());
    e.i("ld.param.u64 %rd2, [tq_out]".into());
    e.i("cvta.to.global.u64 %rd2, %rd2".into());
    e.nrd = 2;
    let mut in_ptr = vec![String::new(); ir.n_fields];
    for f in ir.used_fields() {
        let r = e.rd();
        e.i(format!("ld.param.u64 {r}, [tq_in{f}]"));
        e.i(format!("cvta.to.global.u64 {r}, {r}"));
        in_ptr[f as usize] = r;
    }
    let (idx, stride, off) = (e.rd(), e.rd(), e.rd());
    let (r1, r2, r3, r4) = (e.r(), e.r(), e.r(), e.r());
    e.i(format!("mov.u32 {r1}, %ctaid.x"));
    e.i(format!("mov.u32 {r2}, %ntid.x"));
    e.i(format!("mov.u32 {r3}, %tid.x"));
    e.i(format!("mov.u32 {r4}, %nctaid.x"));
    e.i(format!("mul.wide.u32 {idx}, {r1}, {r2}"));
    e.i(format!("cvt.u64.u32 {off}, {r3}"));
    e.i(format!("add.u64 {idx}, {idx}, {off}"));
    e.i(format!("mul.wide.u32 {stride}, {r4}, {r2}"));
    let pdone = e.p();
    e.label("$L_loop");
    e.i(format!("setp.ge.u64 {pdone}, {idx}, %rd1"));
    e.i(format!("@{pdone} bra $L_done"));
    e.i(format!("shl.b64 {off}, {idx}, {}", sz.trailing_zeros()));
    let mut vals: Vec<String> = Vec::with_capacity(ir.insts.len());
    for inst in &ir.insts {
        let v = match *inst {
            Inst::Const(bits) => {
                let d = e.f();
                let c = e.c(f64::from_bits(bits));
                e.i(format!("mov.{t} {d}, {c}"));
                d
            }
            Inst::Field(f) => {
                let a = e.rd();
                let d = e.f();
                e.i(format!("add.u64 {a}, {}, {off}", in_ptr[f as usize]));
                e.i(format!("ld.global.nc.{t} {d}, [{a}]"));
                d
            }
            Inst::Un(op, a) => e.unary(op, &vals[a as usize]),
            Inst::Bin(op, a, b) => e.binary(op, &vals[a as usize], &vals[b as usize]),
            Inst::Select(c, a, b) => {
                let (p, d) = (e.p(), e.f());
                let z = e.c(0.0);
                e.i(format!("setp.neu.{t} {p}, {}, {z}", vals[c as usize]));
                e.i(format!(
                    "selp.{t} {d}, {}, {}, {p}",
                    vals[a as usize], vals[b as usize]
                ));
                d
            }
        };
        vals.push(v);
    }
    let a = e.rd();
    e.i(format!("add.u64 {a}, %rd2, {off}"));
    e.i(format!("st.global.{t} [{a}], {}", vals[ir.result as usize]));
    e.i(format!("add.u64 {idx}, {idx}, {stride}"));
    e.i("bra.uni $L_loop".into());
    e.label("$L_done");
    e.i("ret".into());

    let mut s = String::new();
    let _ = writeln!(s, "//");
    let _ = writeln!(
        s,
        "// Generated by tessera-query (dissertation 6.3.4): {} fields, {}",
        ir.n_fields,
        ir.precision.name()
    );
    let _ = writeln!(s, "//");
    let _ = writeln!(s, ".version 8.0");
    let _ = writeln!(s, ".target sm_{sm}");
    let _ = writeln!(s, ".address_size 64");
    let _ = writeln!(s);
    let _ = writeln!(s, ".visible .entry {name}(");
    for f in 0..ir.n_fields {
        let _ = writeln!(s, "\t.param .u64 tq_in{f},");
    }
    let _ = writeln!(s, "\t.param .u64 tq_out,");
    let _ = writeln!(s, "\t.param .u64 tq_n");
    let _ = writeln!(s, ")");
    let _ = writeln!(s, "{{");
    let _ = writeln!(s, "\t.reg .pred %p<{}>;", e.np + 1);
    let _ = writeln!(s, "\t.reg .b32 %r<{}>;", e.nr + 1);
    let _ = writeln!(s, "\t.reg .b64 %rd<{}>;", e.nrd + 1);
    if e.nf32 > 0 {
        let _ = writeln!(s, "\t.reg .f32 %f<{}>;", e.nf32 + 1);
    }
    if e.nf64 > 0 {
        let _ = writeln!(s, "\t.reg .f64 %fd<{}>;", e.nf64 + 1);
    }
    let _ = writeln!(s);
    for l in &e.body {
        s.push_str(l);
        s.push('\n');
    }
    s.push_str("}\n");
    PtxModule { name, text: s }
}

/// Instruction emitter with one counter per register class.
struct Emitter {
    prec: Precision,
    /// `f32` or `f64`
    t: &'static str,
    body: Vec<String>,
    np: usize,
    nr: usize,
    nrd: usize,
    nf32: usize,
    nf64: usize,
}

impl Emitter {
    fn new(prec: Precision) -> Self {
        Emitter {
            prec,
            t: prec.name(),
            body: Vec::new(),
            np: 0,
            nr: 0,
            nrd: 0,
            nf32: 0,
            nf64: 0,
        }
    }
    fn i(&mut self, s: String) {
        self.body.push(format!("\t{s};"));
    }
    fn label(&mut self, l: &str) {
        self.body.push(format!("{l}:"));
    }
    fn p(&mut self) -> String {
        self.np += 1;
        format!("%p{}", self.np)
    }
    fn r(&mut self) -> String {
        self.nr += 1;
        format!("%r{}", self.nr)
    }
    fn rd(&mut self) -> String {
        self.nrd += 1;
        format!("%rd{}", self.nrd)
    }
    fn f32r(&mut self) -> String {
        self.nf32 += 1;
        format!("%f{}", self.nf32)
    }
    fn f64r(&mut self) -> String {
        self.nf64 += 1;
        format!("%fd{}", self.nf64)
    }
    /// A float register of the current precision.
    fn f(&mut self) -> String {
        match self.prec {
            Precision::F32 => self.f32r(),
            Precision::F64 => self.f64r(),
        }
    }
    /// A float immediate of the current precision (exact bit pattern).
    fn c(&self, v: f64) -> String {
        match self.prec {
            Precision::F32 => format!("0f{:08X}", (v as f32).to_bits()),
            Precision::F64 => format!("0d{:016X}", v.to_bits()),
        }
    }
    /// A float immediate given by its bits in each precision.
    fn cb(&self, b32: u32, b64: u64) -> String {
        match self.prec {
            Precision::F32 => format!("0f{b32:08X}"),
            Precision::F64 => format!("0d{b64:016X}"),
        }
    }
    fn op2(&mut self, op: &str, a: &str, b: &str) -> String {
        let d = self.f();
        let t = self.t;
        self.i(format!("{op}.{t} {d}, {a}, {b}"));
        d
    }
    fn op1(&mut self, op: &str, a: &str) -> String {
        let d = self.f();
        let t = self.t;
        self.i(format!("{op}.{t} {d}, {a}"));
        d
    }
    fn fma(&mut self, a: &str, b: &str, c: &str) -> String {
        let d = self.f();
        let t = self.t;
        self.i(format!("fma.rn.{t} {d}, {a}, {b}, {c}"));
        d
    }
    /// `d = p ? a : b`
    fn sel(&mut self, p: &str, a: &str, b: &str) -> String {
        let d = self.f();
        let t = self.t;
        self.i(format!("selp.{t} {d}, {a}, {b}, {p}"));
        d
    }
    fn setp(&mut self, cmp: &str, a: &str, b: &str) -> String {
        let p = self.p();
        let t = self.t;
        self.i(format!("setp.{cmp}.{t} {p}, {a}, {b}"));
        p
    }
    /// Horner evaluation of `sum c[k] x^k`.
    fn horner(&mut self, x: &str, coef: &[f64]) -> String {
        let n = coef.len();
        let mut acc = self.f();
        let t = self.t;
        let c = self.c(coef[n - 1]);
        self.i(format!("mov.{t} {acc}, {c}"));
        for k in (0..n - 1).rev() {
            let c = self.c(coef[k]);
            acc = self.fma(&acc, x, &c);
        }
        acc
    }

    fn binary(&mut self, op: Bin, a: &str, b: &str) -> String {
        let t = self.t;
        match op {
            Bin::Add => self.op2("add.rn", a, b),
            Bin::Sub => self.op2("sub.rn", a, b),
            Bin::Mul => self.op2("mul.rn", a, b),
            Bin::Div => self.op2("div.rn", a, b),
            Bin::Min | Bin::Max => {
                // b if (b < a) or a is NaN, else a  (min); b if (b > a) or a is NaN (max)
                let p1 = self.setp(if op == Bin::Min { "lt" } else { "gt" }, b, a);
                let p2 = self.setp("nan", a, a);
                let p3 = self.p();
                self.i(format!("or.pred {p3}, {p1}, {p2}"));
                self.sel(&p3, b, a)
            }
            Bin::Lt | Bin::Le | Bin::Gt | Bin::Ge | Bin::Eq | Bin::Ne => {
                let cmp = match op {
                    Bin::Lt => "lt",
                    Bin::Le => "le",
                    Bin::Gt => "gt",
                    Bin::Ge => "ge",
                    Bin::Eq => "eq",
                    _ => "neu",
                };
                let p = self.setp(cmp, a, b);
                let (one, zero) = (self.c(1.0), self.c(0.0));
                let d = self.f();
                self.i(format!("selp.{t} {d}, {one}, {zero}, {p}"));
                d
            }
            Bin::Atan2 => self.atan2(a, b),
            Bin::Pow => match self.prec {
                Precision::F64 => self.pow64(a, b),
                Precision::F32 => {
                    let (x, y) = (self.f64r(), self.f64r());
                    self.i(format!("cvt.f64.f32 {x}, {a}"));
                    self.i(format!("cvt.f64.f32 {y}, {b}"));
                    self.prec = Precision::F64;
                    self.t = "f64";
                    let r = self.pow64(&x, &y);
                    self.prec = Precision::F32;
                    self.t = "f32";
                    let d = self.f32r();
                    self.i(format!("cvt.rn.f32.f64 {d}, {r}"));
                    d
                }
            },
        }
    }

    fn unary(&mut self, op: Un, a: &str) -> String {
        let t = self.t;
        match op {
            Un::Neg => self.op1("neg", a),
            Un::Abs => self.op1("abs", a),
            Un::Sqrt => self.op1("sqrt.rn", a),
            Un::Floor => {
                let d = self.f();
                self.i(format!("cvt.rmi.{t}.{t} {d}, {a}"));
                d
            }
            Un::Ceil => {
                let d = self.f();
                self.i(format!("cvt.rpi.{t}.{t} {d}, {a}"));
                d
            }
            Un::Exp => match self.prec {
                Precision::F32 => self.exp32(a),
                Precision::F64 => self.exp64(a),
            },
            Un::Log | Un::Log2 => {
                let l = match self.prec {
                    Precision::F32 => self.log32(a, op == Un::Log2),
                    Precision::F64 => self.log64(a),
                };
                if op == Un::Log2 && self.prec == Precision::F64 {
                    let c = self.c(std::f64::consts::LOG2_E);
                    self.op2("mul.rn", &l, &c)
                } else {
                    l
                }
            }
            Un::Sin | Un::Cos | Un::Tan => match self.prec {
                Precision::F32 => {
                    let r = self.reduce_2pi_32(a);
                    match op {
                        Un::Sin => self.sin32(&r),
                        Un::Cos => self.op1("cos.approx", &r),
                        _ => {
                            let s = self.sin32(&r);
                            let c = self.op1("cos.approx", &r);
                            self.op2("div.rn", &s, &c)
                        }
                    }
                }
                Precision::F64 => {
                    let (s, c) = self.sincos64(a);
                    match op {
                        Un::Sin => s,
                        Un::Cos => c,
                        _ => self.op2("div.rn", &s, &c),
                    }
                }
            },
            Un::Atan => self.atan(a),
            Un::Asin | Un::Acos => {
                let one = self.c(1.0);
                let u = self.op2("sub.rn", &one, a);
                let v = self.op2("add.rn", &one, a);
                let w = self.op2("mul.rn", &u, &v);
                let s = self.op1("sqrt.rn", &w);
                if op == Un::Asin {
                    self.atan2(a, &s)
                } else {
                    self.atan2(&s, a)
                }
            }
        }
    }

    /// f32 exp: `x = n ln2 + r` (Cody-Waite with FMA), `2^(r log2e)` by `ex2.approx`, times `2^(n-1) * 2`.
    fn exp32(&mut self, x: &str) -> String {
        let l2e = self.c(std::f64::consts::LOG2_E);
        let t = self.op2("mul.rn", x, &l2e);
        let n = self.f();
        self.i(format!("cvt.rni.f32.f32 {n}, {t}"));
        let (hi, lo) = ("0fBF317218", "0f3102E308"); // -ln2 hi, -ln2 lo
        let r = self.fma(&n, hi, x);
        let r = self.fma(&n, lo, &r);
        let r2 = self.op2("mul.rn", &r, &l2e);
        let e = self.op1("ex2.approx", &r2);
        let m1 = self.op2("add.rn", &n, "0fBF800000");
        let s = self.op1("ex2.approx", &m1);
        let y = self.op2("mul.rn", &e, &s);
        let y = self.op2("add.rn", &y, &y);
        self.exp_fixup(x, &y, 88.8, -104.0)
    }

    /// exp(x) = inf above `hi`, 0 below `lo` (also the infinities); NaN propagates.
    fn exp_fixup(&mut self, x: &str, y: &str, hi: f64, lo: f64) -> String {
        let (h, l) = (self.c(hi), self.c(lo));
        let inf = self.cb(0x7F80_0000, 0x7FF0_0000_0000_0000);
        let zero = self.c(0.0);
        let p = self.setp("gt", x, &h);
        let y = self.sel(&p, &inf, y);
        let q = self.setp("lt", x, &l);
        self.sel(&q, &zero, &y)
    }

    /// f32 log (or log2 with `base2`): `lg2.approx`, or a log1p series where `|x - 1| < 1/16`.
    fn log32(&mut self, x: &str, base2: bool) -> String {
        let l = self.op1("lg2.approx", x);
        let l = if base2 {
            l
        } else {
            let ln2 = self.c(std::f64::consts::LN_2);
            self.op2("mul.rn", &l, &ln2)
        };
        let one = self.c(1.0);
        let u = self.op2("sub.rn", x, &one);
        let coef: Vec<f64> = (0..9)
            .map(|k| {
                if k == 0 {
                    0.0
                } else {
                    (if k % 2 == 1 { 1.0 } else { -1.0 }) / k as f64
                }
            })
            .collect();
        // u * (1 - u/2 + u^2/3 - ...): Horner on coef[1..]
        let poly = self.horner(&u, &coef[1..]);
        let mut s = self.op2("mul.rn", &u, &poly);
        if base2 {
            let c = self.c(std::f64::consts::LOG2_E);
            s = self.op2("mul.rn", &s, &c);
        }
        let au = self.op1("abs", &u);
        let lim = self.c(0.0625);
        let p = self.setp("lt", &au, &lim);
        self.sel(&p, &s, &l)
    }

    /// f32 sine of a reduced argument: `sin.approx` (absolute error), or for `|r| < 1/4` the
    /// Taylor polynomial `r (1 - r²/6 + r⁴/120 - r⁶/5040)` so small values keep their
    /// relative accuracy (`sin.approx` may return 0 for tiny arguments).
    fn sin32(&mut self, r: &str) -> String {
        let sa = self.op1("sin.approx", r);
        let r2 = self.op2("mul.rn", r, r);
        let p = self.horner(&r2, &[1.0, -1.0 / 6.0, 1.0 / 120.0, -1.0 / 5040.0]);
        let sp = self.op2("mul.rn", r, &p);
        let ar = self.op1("abs", r);
        let q = self.c(0.25);
        let small = self.setp("lt", &ar, &q);
        self.sel(&small, &sp, &sa)
    }

    /// f32: `r = x - k 2π` with `k = rint(x / 2π)`, 2π split in three f32 constants.
    fn reduce_2pi_32(&mut self, x: &str) -> String {
        let inv = self.c(1.0 / std::f64::consts::TAU);
        let t = self.op2("mul.rn", x, &inv);
        let k = self.f();
        self.i(format!("cvt.rni.f32.f32 {k}, {t}"));
        let r = self.fma(&k, "0fC0C90FDB", x);
        let r = self.fma(&k, "0f343BBD2E", &r);
        self.fma(&k, "0f27F72CED", &r)
    }

    /// f64 exp: reduction by ln2 (double-double constant, FMA), Taylor degree 13 on
    /// `|r| <= ln2/2`, scale by `2^n1 * 2^n2` built from exponent bits.
    fn exp64(&mut self, x: &str) -> String {
        let l2e = self.c(std::f64::consts::LOG2_E);
        let t = self.op2("mul.rn", x, &l2e);
        let n = self.f();
        self.i(format!("cvt.rni.f64.f64 {n}, {t}"));
        let lim = self.c(1100.0);
        let nlim = self.c(-1100.0);
        let n = self.op2("min", &n, &lim);
        let n = self.op2("max", &n, &nlim);
        let r = self.fma(&n, "0dBFE62E42FEFA39EF", x);
        let r = self.fma(&n, "0dBC7ABC9E3B39803F", &r);
        let mut coef = vec![1.0f64];
        for k in 1..=13 {
            let prev = coef[k - 1];
            coef.push(prev / k as f64);
        }
        let p = self.horner(&r, &coef);
        // n1 = trunc(n/2), n2 = n - n1
        let half = self.c(0.5);
        let h = self.op2("mul.rn", &n, &half);
        let n1 = self.f();
        self.i(format!("cvt.rzi.f64.f64 {n1}, {h}"));
        let n2 = self.op2("sub.rn", &n, &n1);
        let s1 = self.pow2_64(&n1);
        let s2 = self.pow2_64(&n2);
        let y = self.op2("mul.rn", &p, &s1);
        let y = self.op2("mul.rn", &y, &s2);
        let y = self.exp_fixup(x, &y, 709.79, -745.2);
        let pn = self.setp("nan", x, x);
        self.sel(&pn, x, &y)
    }

    /// 2^k for an integral f64 `k` in [-1022, 1023] from its exponent bits.
    fn pow2_64(&mut self, k: &str) -> String {
        let (i, b) = (self.rd(), self.rd());
        self.i(format!("cvt.rni.s64.f64 {i}, {k}"));
        self.i(format!("add.s64 {i}, {i}, 1023"));
        self.i(format!("shl.b64 {b}, {i}, 52"));
        let d = self.f64r();
        self.i(format!("mov.b64 {d}, {b}"));
        d
    }

    /// f64 natural log: `x = 2^e m`, `m in [sqrt(1/2), sqrt(2))`, `log m = 2 atanh(f)` with
    /// `f = (m-1)/(m+1)` (odd series to f^21); subnormals are scaled by 2^54 first.
    fn log64(&mut self, x: &str) -> String {
        let tiny = self.c(f64::MIN_POSITIVE);
        let psub = self.setp("lt", x, &tiny);
        let scale = self.c(18014398509481984.0); // 2^54
        let xs = self.op2("mul.rn", x, &scale);
        let xx = self.sel(&psub, &xs, x);
        let (bits, e, m) = (self.rd(), self.rd(), self.rd());
        self.i(format!("mov.b64 {bits}, {xx}"));
        self.i(format!("shr.u64 {e}, {bits}, 52"));
        self.i(format!("and.b64 {e}, {e}, 2047"));
        self.i(format!("and.b64 {m}, {bits}, 4503599627370495"));
        self.i(format!("or.b64 {m}, {m}, 4607182418800017408"));
        let (mf, ef) = (self.f64r(), self.f64r());
        self.i(format!("mov.b64 {mf}, {m}"));
        self.i(format!("cvt.rn.f64.s64 {ef}, {e}"));
        let bias = self.c(-1023.0);
        let ef = self.op2("add.rn", &ef, &bias);
        let adj = self.c(-54.0);
        let efs = self.op2("add.rn", &ef, &adj);
        let ef = self.sel(&psub, &efs, &ef);
        let sqrt2 = self.c(std::f64::consts::SQRT_2);
        let pbig = self.setp("gt", &mf, &sqrt2);
        let half = self.c(0.5);
        let mh = self.op2("mul.rn", &mf, &half);
        let mf = self.sel(&pbig, &mh, &mf);
        let one = self.c(1.0);
        let ef1 = self.op2("add.rn", &ef, &one);
        let ef = self.sel(&pbig, &ef1, &ef);
        let num = self.op2("sub.rn", &mf, &one);
        let den = self.op2("add.rn", &mf, &one);
        let f = self.op2("div.rn", &num, &den);
        let s = self.op2("mul.rn", &f, &f);
        let coef: Vec<f64> = (0..11).map(|k| 2.0 / (2 * k + 1) as f64).collect();
        let poly = self.horner(&s, &coef);
        let lm = self.op2("mul.rn", &f, &poly);
        let r = self.fma(&ef, "0d3C7ABC9E3B39803F", &lm);
        let r = self.fma(&ef, "0d3FE62E42FEFA39EF", &r);
        // specials: 0 -> -inf, < 0 -> NaN, +inf -> +inf, NaN -> NaN
        let zero = self.c(0.0);
        let pz = self.setp("eq", x, &zero);
        let r = self.sel(&pz, "0dFFF0000000000000", &r);
        let pn = self.setp("lt", x, &zero);
        let r = self.sel(&pn, "0d7FF8000000000000", &r);
        let pinf = self.setp("eq", x, "0d7FF0000000000000");
        let r = self.sel(&pinf, x, &r);
        let pnan = self.setp("nan", x, x);
        self.sel(&pnan, x, &r)
    }

    /// f64 sin and cos: `k = rint(2x/π)`, `r = x - k π/2` (three-part constant, FMA),
    /// Taylor polynomials on `|r| <= π/4`, quadrant selection by `k mod 4`.
    fn sincos64(&mut self, x: &str) -> (String, String) {
        let tpi = self.c(std::f64::consts::FRAC_2_PI);
        let t = self.op2("mul.rn", x, &tpi);
        let k = self.f64r();
        self.i(format!("cvt.rni.f64.f64 {k}, {t}"));
        let r = self.fma(&k, "0dBFF921FB54442D18", x);
        let r = self.fma(&k, "0dBC91A62633145C07", &r);
        let r = self.fma(&k, "0d391F1976B7ED8FBC", &r);
        // beyond 1e15 this reduction is meaningless (no Payne-Hanek): give sin 0, cos 1
        // (finite, documented as inaccurate); infinities and NaN still give NaN
        let ax = self.op1("abs", x);
        let big = self.c(1e15);
        let phuge = self.setp("gt", &ax, &big);
        let pfin = self.setp("ne", &ax, "0d7FF0000000000000");
        let ph = self.p();
        self.i(format!("and.pred {ph}, {phuge}, {pfin}"));
        let zero = self.c(0.0);
        let r = self.sel(&ph, &zero, &r);
        let r2 = self.op2("mul.rn", &r, &r);
        // sin r = r * P(r^2), cos r = Q(r^2)
        let mut sc = Vec::new();
        let mut cc = Vec::new();
        let mut fact = 1.0f64;
        for n in 0..20 {
            if n > 0 {
                fact *= n as f64;
            }
            let sign = if (n / 2) % 2 == 0 { 1.0 } else { -1.0 };
            if n % 2 == 1 {
                sc.push(sign / fact);
            } else {
                cc.push(sign / fact);
            }
        }
        let ps = self.horner(&r2, &sc);
        let s = self.op2("mul.rn", &r, &ps);
        let c = self.horner(&r2, &cc);
        // quadrant
        let (qi, q1, q2, q3) = (self.rd(), self.rd(), self.rd(), self.rd());
        // clamp k so the integer conversion is defined (results there are inaccurate anyway)
        let lim = self.c(4503599627370496.0);
        let nlim = self.c(-4503599627370496.0);
        let kc = self.op2("min", &k, &lim);
        let kc = self.op2("max", &kc, &nlim);
        self.i(format!("cvt.rni.s64.f64 {qi}, {kc}"));
        self.i(format!("and.b64 {q1}, {qi}, 1"));
        self.i(format!("and.b64 {q2}, {qi}, 2"));
        self.i(format!("add.s64 {q3}, {qi}, 1"));
        self.i(format!("and.b64 {q3}, {q3}, 2"));
        let (podd, pns, pnc) = (self.p(), self.p(), self.p());
        self.i(format!("setp.ne.s64 {podd}, {q1}, 0"));
        self.i(format!("setp.ne.s64 {pns}, {q2}, 0"));
        self.i(format!("setp.ne.s64 {pnc}, {q3}, 0"));
        let sv = self.sel(&podd, &c, &s);
        let cv = self.sel(&podd, &s, &c);
        let nsv = self.op1("neg", &sv);
        let ncv = self.op1("neg", &cv);
        let sin = self.sel(&pns, &nsv, &sv);
        let cos = self.sel(&pnc, &ncv, &cv);
        (sin, cos)
    }

    /// Predicate: the sign bit of `x` is set (true for -0 and negative NaN payloads too).
    fn signbit(&mut self, x: &str) -> String {
        let p = self.p();
        let (b, sh, bt, it) = match self.prec {
            Precision::F32 => (self.r(), 31, "b32", "s32"),
            Precision::F64 => (self.rd(), 63, "b64", "s64"),
        };
        self.i(format!("mov.{bt} {b}, {x}"));
        self.i(format!("shr.u{} {b}, {b}, {sh}", &bt[1..]));
        self.i(format!("setp.ne.{it} {p}, {b}, 0"));
        p
    }

    /// atan for any precision: `|x| > 1 -> π/2 - atan(1/|x|)`, `t > tan(π/12) -> π/6 +
    /// atan((t√3 - 1)/(t + √3))`, odd Taylor series on `|t| <= tan(π/12)`, sign restored.
    fn atan(&mut self, x: &str) -> String {
        let ax = self.op1("abs", x);
        let a = self.atan_pos(&ax);
        let zero = self.c(0.0);
        let pn = self.setp("lt", x, &zero);
        let na = self.op1("neg", &a);
        self.sel(&pn, &na, &a)
    }

    /// atan of a non-negative (or NaN) value.
    fn atan_pos(&mut self, ax: &str) -> String {
        let one = self.c(1.0);
        let pbig = self.setp("gt", ax, &one);
        let inv = self.op2("div.rn", &one, ax);
        let t = self.sel(&pbig, &inv, ax);
        let tan12 = self.cb(0x3E89_30A3, 0x3FD1_2614_5E9E_CD56);
        let pmid = self.setp("gt", &t, &tan12);
        let sqrt3 = self.cb(0x3FDD_B3D7, 0x3FFB_B67A_E858_4CAA);
        let m1 = self.c(-1.0);
        let num = self.fma(&t, &sqrt3, &m1);
        let den = self.op2("add.rn", &t, &sqrt3);
        let u = self.op2("div.rn", &num, &den);
        let t = self.sel(&pmid, &u, &t);
        let t2 = self.op2("mul.rn", &t, &t);
        let terms = match self.prec {
            Precision::F32 => 7,
            Precision::F64 => 15,
        };
        let coef: Vec<f64> = (0..terms)
            .map(|k| (if k % 2 == 0 { 1.0 } else { -1.0 }) / (2 * k + 1) as f64)
            .collect();
        let p = self.horner(&t2, &coef);
        let a = self.op2("mul.rn", &t, &p);
        let pio6 = self.cb(0x3F06_0A92, 0x3FE0_C152_382D_7366);
        let a6 = self.op2("add.rn", &a, &pio6);
        let a = self.sel(&pmid, &a6, &a);
        let pio2 = self.cb(0x3FC9_0FDB, 0x3FF9_21FB_5444_2D18);
        let ab = self.op2("sub.rn", &pio2, &a);
        self.sel(&pbig, &ab, &a)
    }

    /// atan2(y, x) from atan(|y|/|x|) with quadrant and infinity/zero handling.
    fn atan2(&mut self, y: &str, x: &str) -> String {
        let (ay, ax) = (self.op1("abs", y), self.op1("abs", x));
        let q = self.op2("div.rn", &ay, &ax);
        let a = self.atan_pos(&q);
        // both infinite: π/4; both zero: 0
        let inf = self.cb(0x7F80_0000, 0x7FF0_0000_0000_0000);
        let p1 = self.setp("eq", &ay, &inf);
        let p2 = self.setp("eq", &ax, &inf);
        let p3 = self.p();
        self.i(format!("and.pred {p3}, {p1}, {p2}"));
        let pio4 = self.cb(0x3F49_0FDB, 0x3FE9_21FB_5444_2D18);
        let a = self.sel(&p3, &pio4, &a);
        let zero = self.c(0.0);
        let z1 = self.setp("eq", &ay, &zero);
        let z2 = self.setp("eq", &ax, &zero);
        let z3 = self.p();
        self.i(format!("and.pred {z3}, {z1}, {z2}"));
        let a = self.sel(&z3, &zero, &a);
        // x < 0 (or x = -0): π - a
        let pneg = self.signbit(x);
        let pi = self.cb(0x4049_0FDB, 0x4009_21FB_5444_2D18);
        let pa = self.op2("sub.rn", &pi, &a);
        let pnx = self.setp("nan", x, x);
        let (nn, pfix) = (self.p(), self.p());
        self.i(format!("not.pred {nn}, {pnx}"));
        self.i(format!("and.pred {pfix}, {pneg}, {nn}"));
        let a = self.sel(&pfix, &pa, &a);
        // sign of y (its sign bit, so atan2(-0, x) = -0 and atan2(-0, -1) = -π as in C)
        let pny = self.signbit(y);
        let na = self.op1("neg", &a);
        self.sel(&pny, &na, &a)
    }

    /// f64 pow with the C99 special cases; general case `exp(y log|x|)`.
    fn pow64(&mut self, x: &str, y: &str) -> String {
        let ax = self.op1("abs", x);
        let l = self.log64(&ax);
        let yl = self.op2("mul.rn", y, &l);
        let r = self.exp64(&yl);
        // x < 0: integer y -> sign by parity; otherwise NaN
        let yi = self.f64r();
        self.i(format!("cvt.rzi.f64.f64 {yi}, {y}"));
        let pint = self.setp("eq", &yi, y);
        let half = self.c(0.5);
        let h = self.op2("mul.rn", y, &half);
        let hi = self.f64r();
        self.i(format!("cvt.rzi.f64.f64 {hi}, {h}"));
        let podd = self.setp("neu", &hi, &h);
        // sign bit of x and odd integer y: negate; finite x < 0 and non-integer y: NaN
        let zero = self.c(0.0);
        let psx = self.signbit(x);
        let (pneg, pnan, t1, t2) = (self.p(), self.p(), self.p(), self.p());
        self.i(format!("and.pred {pneg}, {psx}, {podd}"));
        self.i(format!("and.pred {pneg}, {pneg}, {pint}"));
        let nr = self.op1("neg", &r);
        let r = self.sel(&pneg, &nr, &r);
        let pxn = self.setp("lt", x, &zero);
        let pfin = self.setp("ne", x, "0dFFF0000000000000");
        self.i(format!("not.pred {t1}, {pint}"));
        self.i(format!("and.pred {t2}, {pxn}, {pfin}"));
        self.i(format!("and.pred {pnan}, {t2}, {t1}"));
        let r = self.sel(&pnan, "0d7FF8000000000000", &r);
        // pow(x, ±0) = 1, pow(1, y) = 1, pow(-1, ±inf) = 1
        let one = self.c(1.0);
        let py0 = self.setp("eq", y, &zero);
        let r = self.sel(&py0, &one, &r);
        let px1 = self.setp("eq", x, &one);
        let r = self.sel(&px1, &one, &r);
        let m1 = self.c(-1.0);
        let pxm1 = self.setp("eq", x, &m1);
        let ay = self.op1("abs", y);
        let pyinf = self.setp("eq", &ay, "0d7FF0000000000000");
        let pb = self.p();
        self.i(format!("and.pred {pb}, {pxm1}, {pyinf}"));
        self.sel(&pb, &one, &r)
    }
}
