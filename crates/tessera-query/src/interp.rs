//! The interpreter, the baseline of dissertation Table 6.2. To make the comparison fair it
//! is not a tree walker: the normalized IR is translated to a register bytecode whose
//! instructions operate on chunks of [`CHUNK`] elements (the dispatch cost is paid once per
//! chunk, and each instruction's inner loop is a tight loop the Rust compiler vectorizes).
//! Registers are reused after the last use of a value (linear scan), so the working set
//! stays in L1/L2 cache.

use crate::ir::{Bin, Inst, Ir, Un};
use crate::math::{select, Real};

/// Elements per chunk.
pub const CHUNK: usize = 512;

#[derive(Clone, Copy, Debug)]
enum Loc {
    Field(u32),
    Reg(u32),
}

#[derive(Clone, Copy, Debug)]
enum Code {
    Un(Un, u32, Loc),
    Bin(Bin, u32, Loc, Loc),
    Sel(u32, Loc, Loc, Loc),
}

/// A query translated to chunked register bytecode.
#[derive(Clone, Debug)]
pub struct Program {
    code: Vec<Code>,
    /// Registers holding constants, filled once per call: (register, value as f64).
    consts: Vec<(u32, f64)>,
    n_regs: usize,
    result: Loc,
    n_fields: usize,
}

impl Program {
    pub fn new(ir: &Ir) -> Program {
        let n = ir.insts.len();
        let mut last_use = vec![0usize; n];
        for (k, i) in ir.insts.iter().enumerate() {
            let mut u = |a: u32| last_use[a as usize] = k;
            match *i {
                Inst::Un(_, a) => u(a),
                Inst::Bin(_, a, b) => {
                    u(a);
                    u(b)
                }
                Inst::Select(c, a, b) => {
                    u(c);
                    u(a);
                    u(b)
                }
                _ => {}
            }
        }
        last_use[ir.result as usize] = usize::MAX;
        let mut loc = vec![Loc::Reg(u32::MAX); n];
        let mut free: Vec<u32> = Vec::new();
        let mut n_regs = 0u32;
        let mut code = Vec::new();
        let mut consts = Vec::new();
        let mut alloc = |free: &mut Vec<u32>| {
            free.pop().unwrap_or_else(|| {
                n_regs += 1;
                n_regs - 1
            })
        };
        // constants first: their registers are filled once per call and never reused
        for (k, i) in ir.insts.iter().enumerate() {
            if let Inst::Const(b) = *i {
                let r = alloc(&mut free);
                consts.push((r, f64::from_bits(b)));
                loc[k] = Loc::Reg(r);
                last_use[k] = usize::MAX;
            }
        }
        for (k, i) in ir.insts.iter().enumerate() {
            match *i {
                Inst::Field(f) => loc[k] = Loc::Field(f),
                Inst::Const(_) => {}
                _ => {
                    let d = alloc(&mut free);
                    code.push(match *i {
                        Inst::Un(op, a) => Code::Un(op, d, loc[a as usize]),
                        Inst::Bin(op, a, b) => Code::Bin(op, d, loc[a as usize], loc[b as usize]),
                        Inst::Select(c, a, b) => {
                            Code::Sel(d, loc[c as usize], loc[a as usize], loc[b as usize])
                        }
                        _ => unreachable!(),
                    });
                    loc[k] = Loc::Reg(d);
                    let ops: &[u32] = match i {
                        Inst::Un(_, a) => &[*a],
                        Inst::Bin(_, a, b) => &[*a, *b],
                        Inst::Select(c, a, b) => &[*c, *a, *b],
                        _ => &[],
                    };
                    for (j, &o) in ops.iter().enumerate() {
                        if last_use[o as usize] == k && !ops[..j].contains(&o) {
                            if let Loc::Reg(r) = loc[o as usize] {
                                free.push(r);
                            }
                        }
                    }
                }
            }
        }
        Program {
            code,
            consts,
            n_regs: n_regs as usize,
            result: loc[ir.result as usize],
            n_fields: ir.n_fields,
        }
    }

    /// Number of bytecode instructions (excluding constants and field reads).
    pub fn len(&self) -> usize {
        self.code.len()
    }
    pub fn is_empty(&self) -> bool {
        self.code.is_empty()
    }

    /// Evaluates over whole arrays. The caller has checked counts and lengths.
    pub fn eval<T: Real>(&self, fields: &[&[T]], out: &mut [T]) {
        debug_assert_eq!(fields.len(), self.n_fields);
        let mut regs: Vec<Vec<T>> = vec![vec![T::zero(); CHUNK]; self.n_regs];
        for &(r, v) in &self.consts {
            regs[r as usize].fill(T::from_f64(v));
        }
        let n = out.len();
        let mut start = 0;
        while start < n {
            let len = CHUNK.min(n - start);
            for c in &self.code {
                match *c {
                    Code::Un(op, d, a) => {
                        let mut dst = std::mem::take(&mut regs[d as usize]);
                        let a = get(&regs, fields, a, start, len);
                        un_loop(op, &mut dst[..len], a);
                        regs[d as usize] = dst;
                    }
                    Code::Bin(op, d, a, b) => {
                        let mut dst = std::mem::take(&mut regs[d as usize]);
                        let a = get(&regs, fields, a, start, len);
                        let b = get(&regs, fields, b, start, len);
                        bin_loop(op, &mut dst[..len], a, b);
                        regs[d as usize] = dst;
                    }
                    Code::Sel(d, c, a, b) => {
                        let mut dst = std::mem::take(&mut regs[d as usize]);
                        let c = get(&regs, fields, c, start, len);
                        let a = get(&regs, fields, a, start, len);
                        let b = get(&regs, fields, b, start, len);
                        for k in 0..len {
                            dst[k] = select(c[k], a[k], b[k]);
                        }
                        regs[d as usize] = dst;
                    }
                }
            }
            out[start..start + len].copy_from_slice(get(&regs, fields, self.result, start, len));
            start += len;
        }
    }
}

#[inline(always)]
fn get<'a, T>(regs: &'a [Vec<T>], fields: &[&'a [T]], l: Loc, start: usize, len: usize) -> &'a [T] {
    match l {
        Loc::Field(f) => &fields[f as usize][start..start + len],
        Loc::Reg(r) => &regs[r as usize][..len],
    }
}

#[inline(always)]
fn map1<T: Real>(d: &mut [T], a: &[T], f: impl Fn(T) -> T) {
    for (d, &a) in d.iter_mut().zip(a) {
        *d = f(a);
    }
}
#[inline(always)]
fn map2<T: Real>(d: &mut [T], a: &[T], b: &[T], f: impl Fn(T, T) -> T) {
    for ((d, &a), &b) in d.iter_mut().zip(a).zip(b) {
        *d = f(a, b);
    }
}

fn un_loop<T: Real>(op: Un, d: &mut [T], a: &[T]) {
    // one monomorphic loop per op so each is vectorized where the op allows it
    macro_rules! arms {
        ($($v:ident),*) => { match op { $(Un::$v => map1(d, a, |x| T::un(Un::$v, x)),)* } };
    }
    arms!(Neg, Abs, Sqrt, Exp, Log, Log2, Sin, Cos, Tan, Asin, Acos, Atan, Floor, Ceil)
}

fn bin_loop<T: Real>(op: Bin, d: &mut [T], a: &[T], b: &[T]) {
    macro_rules! arms {
        ($($v:ident),*) => { match op { $(Bin::$v => map2(d, a, b, |x, y| T::bin(Bin::$v, x, y)),)* } };
    }
    arms!(Add, Sub, Mul, Div, Pow, Atan2, Min, Max, Lt, Le, Gt, Ge, Eq, Ne)
}
