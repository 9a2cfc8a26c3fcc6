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
//! | `sin`, `cos` | `\|x\| <= 1e4`: reduction by 2π (3 constants), `sin.approx`/`cos.approx`: absolute error ≤ 2^-19 (sine: Taylor polynomial for reduced `\|r\| < 1/4`, relative accuracy near 0); `\|x\| > 1e4`: the f64 sequence rounded to f32: ≤ 1 ulp | reduction by π/2: Cody-Waite (3-part constant, FMA) for `\|x\| <= 2^31`, Payne-Hanek above (a `.global` table of 2/π bits, four 64×64-bit products, quadrant from the top bits; a branch around the block), Taylor polynomials: ≤ 4 ulp + 2e-16 absolute for **all** finite `x` (host model of the same integer algorithm: ≤ 2 ulp, also for results near 0 such as `cos(6381956970095103·2^797)`) |
//! | `tan` | the f64 sequence rounded to f32 (`sin.approx / cos.approx` has no bound near the poles): ≤ 1 ulp + (4 ulp(f64) + 2e-16)(1 + tan²) | `sin / cos` of the above: ≤ (4 ulp + 2e-16)(1 + tan²) |
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

/// f64 `sin`/`cos`/`tan` use the Cody-Waite reduction for `|x| <= 2^31` (as CUDA's libdevice
/// does) and the Payne-Hanek reduction above.
pub const PAYNE_HANEK_MIN: f64 = 2147483648.0;

/// f32 `sin`/`cos`/`tan` use the 2π reduction and `sin.approx`/`cos.approx` for `|x| <= 1e4`
/// and the f64 sequence (rounded to f32) above.
pub const F32_TRIG_FAST_MAX: f32 = 1e4;

/// π/2 as three f64 parts (bits) for the Cody-Waite reduction: `c1 + c2 + c3 = π/2` to
/// about 160 bits (`c3 < 0`); the FMAs compute `x - k c1 - k c2 - k c3`, `k c1` exactly for
/// `|k| <= 2^31`.
const PIO2_CW_BITS: [u64; 3] = [
    0x3FF9_21FB_5444_2D18,
    0x3C91_A626_3314_5C07,
    0xB91F_1976_B7ED_8FBC,
];

/// `round(π/2 · 2^63)`: π/2 as a 64-bit fixed-point number for the Payne-Hanek reduction.
const PIO2_U64: u64 = 0xC90F_DAA2_2168_C235;

/// Name of the module-scope `.global` table holding [`TWO_OVER_PI`].
pub const TWO_OVER_PI_SYMBOL: &str = "__tessera_2overpi";

/// The bits of 2/π after the binary point, 64 per word, most significant first (the table of
/// fdlibm's `__kernel_rem_pio2` and CUDA's slow path), preceded by one zero word so that the
/// Payne-Hanek window starts at word `(e - 1024) >> 6` for every biased exponent `e >= 1024`
/// (`|x| >= 2`). Word 18 is the last one the largest finite double needs.
pub const TWO_OVER_PI: [u64; 19] = [
    0x0000_0000_0000_0000,
    0xA2F9_836E_4E44_1529,
    0xFC27_57D1_F534_DDC0,
    0xDB62_9599_3C43_9041,
    0xFE51_63AB_DEBB_C561,
    0xB724_6E3A_424D_D2E0,
    0x0649_2EEA_09D1_921C,
    0xFE1D_EB1C_B129_A73E,
    0xE882_35F5_2EBB_4484,
    0xE99C_7026_B45F_7E41,
    0x3991_D639_8353_39F4,
    0x9C84_5F8B_BDF9_283B,
    0x1FF8_97FF_DE05_980F,
    0xEF2F_118B_5A0A_6D1F,
    0x6D36_7ECF_27CB_09B7,
    0x4F46_3F66_9E5F_EA2D,
    0x7527_BAC7_EBE5_F17B,
    0x3D07_39F7_8A52_92EA,
    0x6BFB_5FB1_1F8D_5D08,
];

/// Taylor coefficients of the f64 sine (`sin r = r P(r²)`) and cosine (`cos r = Q(r²)`)
/// polynomials, degree 19 and 18, for `|r| <= π/4` (plus the rounding slack of `k`).
fn sincos_taylor() -> (Vec<f64>, Vec<f64>) {
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
    (sc, cc)
}

/// Host model of the Payne-Hanek reduction that [`emit`] writes in PTX (the same integer
/// operations, instruction for instruction; PTX shifts by 64 give 0): for a finite `x` with
/// `|x| >= 2` returns `(q, r)` with `x ≈ q π/2 + r`, `|r| <= π/4`. Used by the tests to verify
/// the algorithm against the host's `sin`/`cos` without a GPU.
pub fn payne_hanek_model(x: f64) -> (i64, f64) {
    let shl = |a: u64, n: u32| a.checked_shl(n).unwrap_or(0);
    let shr = |a: u64, n: u32| a.checked_shr(n).unwrap_or(0);
    let bits = x.to_bits();
    let e = (bits >> 52) & 2047;
    let ia = (bits << 11) | 0x8000_0000_0000_0000;
    let u = e.wrapping_sub(1024);
    let j = (u >> 6) as usize;
    let sh = (u as u32) & 63;
    let shc = 64 - sh;
    let mut lo = [0u64; 4];
    let mut hi = [0u64; 4];
    for k in 0..4 {
        let p = ia as u128 * TWO_OVER_PI[j + k] as u128;
        lo[k] = p as u64;
        hi[k] = (p >> 64) as u64;
    }
    let a0 = lo[3];
    let (a1, c1) = lo[2].overflowing_add(hi[3]);
    let (t, c2a) = lo[1].overflowing_add(hi[2]);
    let (a2, c2b) = t.overflowing_add(c1 as u64);
    let a3 = lo[0].wrapping_add(hi[1]).wrapping_add((c2a || c2b) as u64);
    let funnel = |up: u64, down: u64| shl(up, sh) | shr(down, shc);
    let (h, m, l) = (funnel(a3, a2), funnel(a2, a1), funnel(a1, a0));
    let mut q = h >> 62;
    let hf = h & 0x3FFF_FFFF_FFFF_FFFF;
    let neg = (hf >> 61) != 0;
    if neg {
        q += 1;
    }
    let (nl, cl) = (!l).overflowing_add(1);
    let (nm, cm) = (!m).overflowing_add(cl as u64);
    let nh = (!hf).wrapping_add(cm as u64) & 0x3FFF_FFFF_FFFF_FFFF;
    let (fh, fm, fl) = if neg { (nh, nm, nl) } else { (hf, m, l) };
    let pz = fh == 0;
    let (gh, gm) = if pz { (fm, fl) } else { (fh, fm) };
    let z1 = gh.leading_zeros();
    let nn = shl(gh, z1) | shr(gm, 64 - z1);
    let p = nn as u128 * PIO2_U64 as u128;
    let ph = ((p >> 64) as u64) | ((p as u64 != 0) as u64);
    let rf = ph as f64;
    let z = z1 + if pz { 64 } else { 0 };
    let scale = f64::from_bits(((962 - z) as u64) << 52);
    let rs = rf * scale;
    let xneg = (bits >> 63) != 0;
    let r = if neg != xneg { -rs } else { rs };
    let q = if xneg {
        (q as i64).wrapping_neg()
    } else {
        q as i64
    };
    (q, r)
}

/// Host model of the whole f64 sin/cos sequence that [`emit`] writes (reduction, polynomials
/// and quadrant selection, with the same FMAs): `(sin x, cos x)`.
pub fn sincos64_model(x: f64) -> (f64, f64) {
    let ax = x.abs();
    let (q, r) = if ax > PAYNE_HANEK_MIN && ax != f64::INFINITY {
        payne_hanek_model(x)
    } else {
        let k = (x * std::f64::consts::FRAC_2_PI).round_ties_even();
        let [c1, c2, c3] = PIO2_CW_BITS.map(|b| -f64::from_bits(b));
        let r = k.mul_add(c1, x);
        let r = k.mul_add(c2, r);
        let r = k.mul_add(c3, r);
        let r = if x == 0.0 { x } else { r };
        (if k.is_nan() { 0 } else { k as i64 }, r)
    };
    let horner = |x: f64, c: &[f64]| {
        let mut acc = c[c.len() - 1];
        for k in (0..c.len() - 1).rev() {
            acc = acc.mul_add(x, c[k]);
        }
        acc
    };
    let (sc, cc) = sincos_taylor();
    let r2 = r * r;
    let s = r * horner(r2, &sc);
    let c = horner(r2, &cc);
    let (sv, cv) = if q & 1 != 0 { (c, s) } else { (s, c) };
    let sin = if q & 2 != 0 { -sv } else { sv };
    let cos = if q.wrapping_add(1) & 2 != 0 { -cv } else { cv };
    (sin, cos)
}

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
    if e.uses_2overpi {
        // bits of 2/π for the Payne-Hanek reduction of huge trigonometric arguments
        let _ = write!(
            s,
            ".global .align 8 .b64 {TWO_OVER_PI_SYMBOL}[{}] = {{",
            TWO_OVER_PI.len()
        );
        for (k, w) in TWO_OVER_PI.iter().enumerate() {
            let sep = if k == 0 { "" } else { "," };
            let nl = if k % 4 == 0 { "\n\t" } else { " " };
            let _ = write!(s, "{sep}{nl}0x{w:016X}");
        }
        let _ = writeln!(s, "\n}};");
        let _ = writeln!(s);
    }
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
    /// Branch-label counter (one pair of labels per trigonometric call site).
    nlabel: usize,
    /// Whether the body loads from [`TWO_OVER_PI_SYMBOL`] (the module then declares the table).
    uses_2overpi: bool,
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
            nlabel: 0,
            uses_2overpi: false,
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
                Precision::F32 => self.trig32(op, a),
                Precision::F64 => self.trig64(op, a),
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

    /// A fresh label number for one branch region.
    fn label_id(&mut self) -> usize {
        self.nlabel += 1;
        self.nlabel
    }

    /// Runs `f` with the emitter switched to f64 (for f32 operations computed in f64).
    fn in_f64<R>(&mut self, f: impl FnOnce(&mut Self) -> R) -> R {
        let (prec, t) = (self.prec, self.t);
        self.prec = Precision::F64;
        self.t = "f64";
        let r = f(self);
        self.prec = prec;
        self.t = t;
        r
    }

    /// f64 `sin`, `cos` or `tan` of `x`.
    fn trig64(&mut self, op: Un, x: &str) -> String {
        let (s, c) = self.sincos64(x);
        match op {
            Un::Sin => s,
            Un::Cos => c,
            _ => self.op2("div.rn", &s, &c),
        }
    }

    /// f32 `sin` or `cos`: for `|x| <= 1e4` reduction by 2π (three f32 constants) and
    /// `sin.approx`/`cos.approx`; for larger finite `|x|` the f64 sequence ([`Self::trig64`],
    /// full range) rounded to f32 (a branch around a block). f32 `tan`: the f64 sequence.
    fn trig32(&mut self, op: Un, a: &str) -> String {
        let d = self.f32r();
        if op == Un::Tan {
            // tan = sin/cos amplifies the absolute error of `cos.approx` near the poles
            // without bound (it can return 0 there): always the f64 sequence
            let xd = self.f64r();
            self.i(format!("cvt.f64.f32 {xd}, {a}"));
            let v = self.in_f64(|e| e.trig64(op, &xd));
            self.i(format!("cvt.rn.f32.f64 {d}, {v}"));
            return d;
        }
        let n = self.label_id();
        let ax = self.op1("abs", a);
        let lim = self.c(F32_TRIG_FAST_MAX as f64);
        let p1 = self.setp("gt", &ax, &lim);
        let p2 = self.setp("ne", &ax, "0f7F800000");
        let pw = self.p();
        self.i(format!("and.pred {pw}, {p1}, {p2}"));
        self.i(format!("@{pw} bra $L_trig{n}_wide"));
        let r = self.reduce_2pi_32(a);
        // ±0 keeps its sign (sin(-0) = -0)
        let zero = self.c(0.0);
        let pz = self.setp("eq", a, &zero);
        let r = self.sel(&pz, a, &r);
        let v = match op {
            Un::Sin => self.sin32(&r),
            _ => self.op1("cos.approx", &r),
        };
        self.i(format!("mov.f32 {d}, {v}"));
        self.i(format!("bra $L_trig{n}_join"));
        self.label(&format!("$L_trig{n}_wide"));
        let xd = self.f64r();
        self.i(format!("cvt.f64.f32 {xd}, {a}"));
        let v = self.in_f64(|e| e.trig64(op, &xd));
        self.i(format!("cvt.rn.f32.f64 {d}, {v}"));
        self.label(&format!("$L_trig{n}_join"));
        d
    }

    /// f64 sin and cos: for `|x| <= 2^31` (and ±inf, NaN), `k = rint(2x/π)`, `r = x - k π/2`
    /// (three-part constant, FMA); for larger finite `|x|` the Payne-Hanek reduction
    /// ([`Self::payne_hanek64`], a branch around a block). Then Taylor polynomials on
    /// `|r| <= π/4` and quadrant selection by `k mod 4`. Infinities and NaN give NaN.
    fn sincos64(&mut self, x: &str) -> (String, String) {
        let (r, qi) = (self.f64r(), self.rd());
        let n = self.label_id();
        let ax = self.op1("abs", x);
        let lim = self.c(PAYNE_HANEK_MIN);
        let p1 = self.setp("gt", &ax, &lim);
        let p2 = self.setp("ne", &ax, "0d7FF0000000000000");
        let pw = self.p();
        self.i(format!("and.pred {pw}, {p1}, {p2}"));
        self.i(format!("@{pw} bra $L_trig{n}_wide"));
        // fast path (Cody-Waite); ±inf give k = ±inf and r = NaN
        let tpi = self.c(std::f64::consts::FRAC_2_PI);
        let t = self.op2("mul.rn", x, &tpi);
        let k = self.f64r();
        self.i(format!("cvt.rni.f64.f64 {k}, {t}"));
        let [c1, c2, c3] = PIO2_CW_BITS.map(|b| format!("0d{:016X}", b ^ (1u64 << 63)));
        let r1 = self.fma(&k, &c1, x);
        let r2 = self.fma(&k, &c2, &r1);
        let r3 = self.fma(&k, &c3, &r2);
        // ±0 keeps its sign (sin(-0) = tan(-0) = -0; the FMAs would give +0)
        let zero = self.c(0.0);
        let pz = self.setp("eq", x, &zero);
        self.i(format!("selp.f64 {r}, {x}, {r3}, {pz}"));
        // |k| <= 2^31 here (NaN converts to 0; r is NaN then anyway)
        self.i(format!("cvt.rni.s64.f64 {qi}, {k}"));
        self.i(format!("bra $L_trig{n}_join"));
        self.label(&format!("$L_trig{n}_wide"));
        self.payne_hanek64(x, &r, &qi);
        self.label(&format!("$L_trig{n}_join"));
        let r2 = self.op2("mul.rn", &r, &r);
        // sin r = r * P(r^2), cos r = Q(r^2)
        let (sc, cc) = sincos_taylor();
        let ps = self.horner(&r2, &sc);
        let s = self.op2("mul.rn", &r, &ps);
        let c = self.horner(&r2, &cc);
        // quadrant
        let (q1, q2, q3) = (self.rd(), self.rd(), self.rd());
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

    /// Payne-Hanek reduction of a finite f64 `x` with `|x| >= 2`: writes `r` (f64) and the
    /// quadrant `q` (s64) with `x = (q + f) π/2`, `|f| <= 1/2`, `r = f π/2`, into the registers
    /// `rr` and `qr`. Integer arithmetic only, loop-free; [`payne_hanek_model`] is the same
    /// algorithm on the host.
    ///
    /// `|x| = ia 2^s` with the 64-bit mantissa `ia` (53 bits shifted up by 11) and
    /// `s = e - 1086` (`e` the biased exponent). Against the 2/π words `w_j` (weight
    /// `2^(-64 j)` after the leading zero word) only the four words from `j0 = (e - 1024) >> 6`
    /// matter: the earlier ones contribute multiples of 4 (whole turns), the later ones less
    /// than 2^-127. The 256-bit product `ia (w_j0..w_j0+3)` is shifted left by `(e - 1024) & 63`
    /// so the top word holds the two quadrant bits and 62 fraction bits; 128 more fraction
    /// bits follow (enough for the closest double to a multiple of π/2, about 2^-61 away).
    fn payne_hanek64(&mut self, x: &str, rr: &str, qr: &str) {
        self.uses_2overpi = true;
        let bits = self.rd();
        self.i(format!("mov.b64 {bits}, {x}"));
        let (e, ia, u, j) = (self.rd(), self.rd(), self.rd(), self.rd());
        self.i(format!("shr.u64 {e}, {bits}, 52"));
        self.i(format!("and.b64 {e}, {e}, 2047"));
        self.i(format!("shl.b64 {ia}, {bits}, 11"));
        self.i(format!("or.b64 {ia}, {ia}, 0x8000000000000000"));
        self.i(format!("sub.s64 {u}, {e}, 1024"));
        self.i(format!("shr.u64 {j}, {u}, 6"));
        let (sh, shc, c64) = (self.r(), self.r(), self.r());
        self.i(format!("cvt.u32.u64 {sh}, {u}"));
        self.i(format!("and.b32 {sh}, {sh}, 63"));
        self.i(format!("mov.u32 {c64}, 64"));
        self.i(format!("sub.u32 {shc}, {c64}, {sh}"));
        let (tb, a) = (self.rd(), self.rd());
        self.i(format!("mov.u64 {tb}, {TWO_OVER_PI_SYMBOL}"));
        self.i(format!("shl.b64 {a}, {j}, 3"));
        self.i(format!("add.u64 {a}, {tb}, {a}"));
        let mut lo = Vec::new();
        let mut hi = Vec::new();
        for k in 0..4 {
            let w = self.rd();
            self.i(format!("ld.global.nc.u64 {w}, [{a}+{}]", 8 * k));
            let (l, h) = (self.rd(), self.rd());
            self.i(format!("mul.lo.u64 {l}, {ia}, {w}"));
            self.i(format!("mul.hi.u64 {h}, {ia}, {w}"));
            lo.push(l);
            hi.push(h);
        }
        // words of the sum, least significant first (the fifth word is whole turns)
        let (a1, a2, a3) = (self.rd(), self.rd(), self.rd());
        let a0 = lo[3].clone();
        self.i(format!("add.cc.u64 {a1}, {}, {}", lo[2], hi[3]));
        self.i(format!("addc.cc.u64 {a2}, {}, {}", lo[1], hi[2]));
        self.i(format!("addc.u64 {a3}, {}, {}", lo[0], hi[1]));
        // window: shift left by sh across words (PTX clamps shifts by 64 to a zero result)
        let funnel = |e: &mut Self, up: &str, down: &str| {
            let (t1, t2, d) = (e.rd(), e.rd(), e.rd());
            e.i(format!("shl.b64 {t1}, {up}, {sh}"));
            e.i(format!("shr.u64 {t2}, {down}, {shc}"));
            e.i(format!("or.b64 {d}, {t1}, {t2}"));
            d
        };
        let h = funnel(self, &a3, &a2);
        let m = funnel(self, &a2, &a1);
        let l = funnel(self, &a1, &a0);
        // quadrant = the two integer bits; fraction >= 1/2: next quadrant, fraction - 1
        let (q, q1, hf, hb) = (self.rd(), self.rd(), self.rd(), self.rd());
        self.i(format!("shr.u64 {q}, {h}, 62"));
        self.i(format!("and.b64 {hf}, {h}, 0x3FFFFFFFFFFFFFFF"));
        self.i(format!("shr.u64 {hb}, {hf}, 61"));
        let pneg = self.p();
        self.i(format!("setp.ne.u64 {pneg}, {hb}, 0"));
        self.i(format!("add.u64 {q1}, {q}, 1"));
        self.i(format!("selp.b64 {q}, {q1}, {q}, {pneg}"));
        let (nl, nm, nh) = (self.rd(), self.rd(), self.rd());
        self.i(format!("not.b64 {nl}, {l}"));
        self.i(format!("not.b64 {nm}, {m}"));
        self.i(format!("not.b64 {nh}, {hf}"));
        self.i(format!("add.cc.u64 {nl}, {nl}, 1"));
        self.i(format!("addc.cc.u64 {nm}, {nm}, 0"));
        self.i(format!("addc.u64 {nh}, {nh}, 0"));
        self.i(format!("and.b64 {nh}, {nh}, 0x3FFFFFFFFFFFFFFF"));
        let (fh, fm, fl) = (self.rd(), self.rd(), self.rd());
        self.i(format!("selp.b64 {fh}, {nh}, {hf}, {pneg}"));
        self.i(format!("selp.b64 {fm}, {nm}, {m}, {pneg}"));
        self.i(format!("selp.b64 {fl}, {nl}, {l}, {pneg}"));
        // normalize: a zero top word moves up by 64 bits, then by its leading zeros
        let pz = self.p();
        self.i(format!("setp.eq.u64 {pz}, {fh}, 0"));
        let (gh, gm) = (self.rd(), self.rd());
        self.i(format!("selp.b64 {gh}, {fm}, {fh}, {pz}"));
        self.i(format!("selp.b64 {gm}, {fl}, {fm}, {pz}"));
        let (z1, zc, z0, z) = (self.r(), self.r(), self.r(), self.r());
        self.i(format!("clz.b64 {z1}, {gh}"));
        self.i(format!("sub.u32 {zc}, {c64}, {z1}"));
        let (n1, n2, nn) = (self.rd(), self.rd(), self.rd());
        self.i(format!("shl.b64 {n1}, {gh}, {z1}"));
        self.i(format!("shr.u64 {n2}, {gm}, {zc}"));
        self.i(format!("or.b64 {nn}, {n1}, {n2}"));
        // times π/2 (64-bit fixed point), the low word as a sticky bit, rounded to f64
        let (ph, pl, st) = (self.rd(), self.rd(), self.rd());
        self.i(format!("mul.hi.u64 {ph}, {nn}, 0x{PIO2_U64:016X}"));
        self.i(format!("mul.lo.u64 {pl}, {nn}, 0x{PIO2_U64:016X}"));
        let pst = self.p();
        self.i(format!("setp.ne.u64 {pst}, {pl}, 0"));
        self.i(format!("selp.b64 {st}, 1, 0, {pst}"));
        self.i(format!("or.b64 {ph}, {ph}, {st}"));
        let rf = self.f64r();
        self.i(format!("cvt.rn.f64.u64 {rf}, {ph}"));
        // scale by 2^(-61 - z)
        self.i(format!("selp.b32 {z0}, 64, 0, {pz}"));
        self.i(format!("add.u32 {z}, {z1}, {z0}"));
        let (ex, c962) = (self.r(), self.r());
        self.i(format!("mov.u32 {c962}, 962"));
        self.i(format!("sub.u32 {ex}, {c962}, {z}"));
        let (eb, scale) = (self.rd(), self.f64r());
        self.i(format!("cvt.u64.u32 {eb}, {ex}"));
        self.i(format!("shl.b64 {eb}, {eb}, 52"));
        self.i(format!("mov.b64 {scale}, {eb}"));
        let rs = self.op2("mul.rn", &rf, &scale);
        // signs: r negated for a negated fraction xor a negative x; q negated for a negative x
        let (pxn, pflip) = (self.p(), self.p());
        let sgn = self.rd();
        self.i(format!("shr.u64 {sgn}, {bits}, 63"));
        self.i(format!("setp.ne.u64 {pxn}, {sgn}, 0"));
        self.i(format!("xor.pred {pflip}, {pneg}, {pxn}"));
        let nr = self.op1("neg", &rs);
        self.i(format!("selp.f64 {rr}, {nr}, {rs}, {pflip}"));
        let nq = self.rd();
        self.i(format!("neg.s64 {nq}, {q}"));
        self.i(format!("selp.b64 {qr}, {nq}, {q}, {pxn}"));
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

#[cfg(test)]
mod tests {
    use super::*;

    fn ulp(w: f64) -> f64 {
        let a = w.abs();
        a.next_up() - a
    }

    /// Deterministic xorshift for reproducible huge arguments.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
    }

    /// Huge arguments: random mantissas with every exponent from 2^31 to 2^1023, a log sweep
    /// 1e15..1e300, the doubles nearest to multiples of π/2, and the classic hardest case
    /// 6381956970095103 · 2^797 (about 2^-61 from a multiple of π/2), with both signs.
    fn huge_arguments() -> Vec<f64> {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        let mut xs = Vec::new();
        for e in 1054u64..=2046 {
            for _ in 0..24 {
                let m = rng.next() & ((1 << 52) - 1);
                xs.push(f64::from_bits((e << 52) | m));
            }
        }
        for k in 0..=4000 {
            xs.push(10f64.powf(15.0 + 285.0 * k as f64 / 4000.0));
        }
        for _ in 0..4000 {
            // x = fl(k π/2) for a random integer k: sin or cos of x is tiny
            let k = (rng.next() >> (rng.next() % 40)) as f64;
            xs.push(k * std::f64::consts::FRAC_PI_2);
        }
        let hard = 6381956970095103.0 * 2f64.powi(797);
        for d in -20i64..=20 {
            xs.push(f64::from_bits((hard.to_bits() as i64 + d) as u64));
        }
        xs.push(f64::MAX);
        let neg: Vec<f64> = xs.iter().map(|x| -x).collect();
        xs.extend(neg);
        xs
    }

    /// Independent wide reduction for the tests: the whole 1152-bit table times the 53-bit
    /// mantissa as a multi-word integer, 128 bits read out at the binary point of `|x| 2/π`
    /// (2 quadrant bits, 126 fraction bits), the fraction times π/2 in double-double. Returns
    /// `(q mod 4, r_hi, r_lo)` for `|x| = (q + f) π/2`, `r = f π/2` (relative error ~2^-100).
    fn wide_reduction(x: f64) -> (i64, f64, f64) {
        let bits = x.abs().to_bits();
        let e = ((bits >> 52) & 2047) as i64;
        assert!(e >= 1024, "|x| >= 2 only");
        let m = (bits & ((1 << 52) - 1)) | (1 << 52);
        let ex = e - 1075; // |x| = m 2^ex
                           // c = m · B with B = Σ T[j] 2^(64 (18 - j)), 2/π ≈ B 2^-1152; little-endian words
        let mut c = vec![0u64; 20];
        let mut carry = 0u128;
        for (w, &t) in TWO_OVER_PI[1..].iter().rev().enumerate() {
            let p = m as u128 * t as u128 + carry;
            c[w] = p as u64;
            carry = p >> 64;
        }
        c[18] = carry as u64;
        // |x| 2/π = c 2^(ex - 1152): the bit of weight 2^-126 is bit 1152 - ex - 126 of c
        let lo = (1152 - ex - 126) as usize;
        let mut v = 0u128;
        for b in (0..128).rev() {
            let k = lo + b;
            v = (v << 1) | ((c[k / 64] >> (k % 64)) & 1) as u128;
        }
        let q = (v.wrapping_add(1u128 << 125) >> 126) as i64; // nearest integer, mod 4
        let frac = v.wrapping_sub((q as u128) << 126) as i128; // |frac| <= 2^125
        let fh = frac as f64;
        let fl = (frac - fh as i128) as f64;
        let (ph, pl) = (std::f64::consts::FRAC_PI_2, 6.123233995736766e-17);
        let rh = fh * ph;
        let rl = fh.mul_add(ph, -rh) + fh * pl + fl * ph;
        let (sh, sl) = {
            let s = rh + rl;
            (s, rl - (s - rh))
        };
        let sc = 2f64.powi(-126);
        if x < 0.0 {
            ((-q) & 3, -sh * sc, -sl * sc)
        } else {
            (q & 3, sh * sc, sl * sc)
        }
    }

    /// sin, cos and tan from the wide reduction (an oracle that keeps relative accuracy where
    /// the result is tiny; the host libm keeps only about 2^-110 absolute there).
    fn wide_trig(x: f64) -> (f64, f64, f64) {
        let (q, rh, rl) = wide_reduction(x);
        let s = rh.sin() + rh.cos() * rl;
        let c = rh.cos() - rh.sin() * rl;
        let t = rh.tan() + (1.0 + rh.tan() * rh.tan()) * rl;
        let (sv, cv) = if q & 1 != 0 { (c, s) } else { (s, c) };
        let tv = if q & 1 != 0 { -1.0 / t } else { t };
        (
            if q & 2 != 0 { -sv } else { sv },
            if (q + 1) & 2 != 0 { -cv } else { cv },
            tv,
        )
    }

    /// Checks `f` against the host's full-range sin/cos/tan with the documented bound (4 ulp +
    /// 2e-16 absolute; tan times `1 + tan²`) and returns the worst errors in ulp against the
    /// wide-reduction oracle (sin, cos, tan, the last relative to `1 + tan²`).
    fn check(xs: &[f64], f: impl Fn(f64) -> (f64, f64)) -> (f64, f64, f64) {
        let (mut ws, mut wc, mut wt) = (0.0f64, 0.0f64, 0.0f64);
        for &x in xs {
            let (s, c) = f(x);
            let (es, ec) = (x.sin(), x.cos());
            let t = s / c;
            let et = x.tan();
            assert!(
                (s - es).abs() <= 4.0 * ulp(es) + 2e-16,
                "sin({x:e}) = {s:e}, want {es:e}"
            );
            assert!(
                (c - ec).abs() <= 4.0 * ulp(ec) + 2e-16,
                "cos({x:e}) = {c:e}, want {ec:e}"
            );
            assert!(
                (t - et).abs() <= (4.0 * ulp(et) + 2e-16) * (1.0 + et * et),
                "tan({x:e}) = {t:e}, want {et:e}"
            );
            let (os, oc, ot) = wide_trig(x);
            ws = ws.max((s - os).abs() / ulp(os));
            wc = wc.max((c - oc).abs() / ulp(oc));
            wt = wt.max((t - ot).abs() / (ulp(ot) * (1.0 + ot * ot)));
        }
        (ws, wc, wt)
    }

    #[test]
    fn payne_hanek_model_matches_host_trig_for_huge_arguments() {
        let xs = huge_arguments();
        let (ws, wc, wt) = check(&xs, sincos64_model);
        eprintln!(
            "{} huge arguments: max error against the wide reduction: sin {ws:.2} ulp, cos {wc:.2} ulp, tan {wt:.2} ulp",
            xs.len()
        );
        // relative accuracy also where the result is tiny (no absolute slack needed)
        assert!(
            ws <= 2.0 && wc <= 2.0 && wt <= 3.0,
            "sin {ws} ulp, cos {wc} ulp, tan {wt}"
        );
    }

    #[test]
    fn payne_hanek_model_reduces_the_hardest_case() {
        // 6381956970095103 · 2^797 is about 2^-61 from a multiple of π/2 (q = 1 mod 4): the
        // reduced argument needs ~120 correct bits of x · 2/π. Reference value of r from a
        // 3000-bit computation of π: 4.687165924254628e-19 (the host libm's cos is 8 ulp off).
        let x = 6381956970095103.0 * 2f64.powi(797);
        let (q, r) = payne_hanek_model(x);
        assert_eq!(q & 3, 1);
        assert_eq!(r, 4.687165924254628e-19);
        let (wq, wr, _) = wide_reduction(x);
        assert_eq!((wq, wr), (1, r));
        let (s, c) = sincos64_model(x);
        assert_eq!((s, c), (1.0, -4.687165924254628e-19));
        let (s, c) = sincos64_model(-x);
        assert_eq!((s, c), (-1.0, -4.687165924254628e-19));
    }

    #[test]
    fn sincos_model_keeps_signed_zero_and_gives_nan_for_non_finite() {
        let (s, c) = sincos64_model(-0.0);
        assert_eq!((s.to_bits(), c), ((-0.0f64).to_bits(), 1.0));
        let (s, c) = sincos64_model(0.0);
        assert_eq!((s.to_bits(), c), (0, 1.0));
        for x in [f64::INFINITY, f64::NEG_INFINITY, f64::NAN] {
            let (s, c) = sincos64_model(x);
            assert!(s.is_nan() && c.is_nan(), "{x}");
        }
    }

    #[test]
    fn payne_hanek_model_is_valid_from_two_and_agrees_with_cody_waite() {
        // the windowing is defined for every |x| >= 2, so it must agree with the oracle (and
        // with the fast path) well below the switch-over at 2^31 too
        let mut rng = Rng(12345);
        let mut xs = Vec::new();
        for e in 1024u64..=1100 {
            for _ in 0..200 {
                xs.push(f64::from_bits((e << 52) | (rng.next() & ((1 << 52) - 1))));
            }
        }
        xs.extend([2.0, 3.0, 1e5, PAYNE_HANEK_MIN, PAYNE_HANEK_MIN.next_up()]);
        let neg: Vec<f64> = xs.iter().map(|x| -x).collect();
        xs.extend(neg);
        for &x in &xs {
            let (q, r) = payne_hanek_model(x);
            let (wq, wr, _) = wide_reduction(x);
            assert!(
                r.abs() <= std::f64::consts::FRAC_PI_4 * (1.0 + 1e-15),
                "{x}: r = {r}"
            );
            assert_eq!(q & 3, wq, "{x}");
            assert!((r - wr).abs() <= ulp(wr), "{x}: r = {r}, want {wr}");
        }
        let (ws, wc, wt) = check(&xs, |x| {
            let (q, r) = payne_hanek_model(x);
            let (s, c) = (r.sin(), r.cos());
            let (sv, cv) = if q & 1 != 0 { (c, s) } else { (s, c) };
            (
                if q & 2 != 0 { -sv } else { sv },
                if q.wrapping_add(1) & 2 != 0 { -cv } else { cv },
            )
        });
        eprintln!(
            "{} arguments in [2, 2^77]: max error sin {ws:.2} ulp, cos {wc:.2} ulp, tan {wt:.2}",
            xs.len()
        );
        // the fast path on the same sweep (below the threshold) stays within the bound
        let small: Vec<f64> = xs
            .iter()
            .copied()
            .filter(|x| x.abs() <= PAYNE_HANEK_MIN)
            .collect();
        let (ws, wc, wt) = check(&small, sincos64_model);
        eprintln!(
            "{} arguments in [2, 2^31] (Cody-Waite): sin {ws:.2}, cos {wc:.2}, tan {wt:.2} ulp",
            small.len()
        );
        assert!(
            ws <= 2.0 && wc <= 2.0 && wt <= 3.0,
            "sin {ws} ulp, cos {wc} ulp, tan {wt}"
        );
    }

    #[test]
    fn trig_ptx_has_the_slow_path_and_the_table_only_when_needed() {
        let fields = ["a"];
        for p in [Precision::F32, Precision::F64] {
            let q = crate::Query::compile("sin(a) + cos(a) * tan(a)", &fields).unwrap();
            let t = emit(q.ir(p)).text;
            // one table declaration, one table address per sin/cos/tan
            assert_eq!(
                t.matches(&format!(".b64 {TWO_OVER_PI_SYMBOL}[19] = {{"))
                    .count(),
                1
            );
            assert_eq!(
                t.matches(&format!("{TWO_OVER_PI_SYMBOL};")).count(),
                3,
                "{t}"
            );
            assert!(t.contains("mul.hi.u64") && t.contains("addc.u64") && t.contains("clz.b64"));
            let q = crate::Query::compile("sqrt(a) + exp(a)", &fields).unwrap();
            assert!(!emit(q.ir(p)).text.contains(TWO_OVER_PI_SYMBOL));
        }
    }
}
