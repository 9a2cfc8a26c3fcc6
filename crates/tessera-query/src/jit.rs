//! The CPU back end: Cranelift JIT (the dissertation used LLVM, §6.3.4; Cranelift is the
//! Rust-native equivalent and compiles in well under a millisecond). It emits one function
//!
//! ```text
//! map(n: i64, inputs: *const *const T, out: *mut T)
//! ```
//!
//! with a main loop that processes 128-bit vectors (f32x4 or f64x2) and a scalar tail loop.
//! Transcendental functions are calls to the Rust functions in `math::callout` (lane by
//! lane in the vector loop), so results are bit-identical to the interpreter. If the host
//! ISA cannot lower a vector operation, the function is rebuilt with the scalar loop only.

use crate::error::QueryError;
use crate::ir::{Bin, Inst, Ir, Un};
use crate::math::{callout, Precision};
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{
    types, AbiParam, InstBuilder, MemFlagsData, Type, UserFuncName, Value,
};
use cranelift_codegen::settings::{self, Configurable};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{default_libcall_names, FuncId, Linkage, Module};
use std::collections::HashMap;

/// A compiled CPU kernel. The machine code lives as long as this value.
pub struct JitKernel {
    module: Option<JITModule>,
    entry: *const u8,
    pub precision: Precision,
    pub n_fields: usize,
    /// Whether the 128-bit SIMD main loop was emitted.
    pub vectorized: bool,
}

// SAFETY: the JIT memory is immutable after `finalize_definitions`; the function pointer is
// a pure function of its arguments (no global state), so sharing across threads is sound.
unsafe impl Send for JitKernel {}
// SAFETY: see above.
unsafe impl Sync for JitKernel {}

impl Drop for JitKernel {
    fn drop(&mut self) {
        if let Some(m) = self.module.take() {
            // SAFETY: `entry` is never called after drop; no other reference to the code exists.
            unsafe { m.free_memory() };
        }
    }
}

type MapFn = unsafe extern "C" fn(i64, *const *const u8, *mut u8);

impl JitKernel {
    /// Compiles `ir`; tries the SIMD loop first, then the scalar loop.
    pub fn compile(ir: &Ir) -> Result<JitKernel, QueryError> {
        match Self::compile_with(ir, true) {
            Ok(k) => Ok(k),
            Err(_) => Self::compile_with(ir, false),
        }
    }

    pub fn compile_with(ir: &Ir, vector: bool) -> Result<JitKernel, QueryError> {
        let e = |m: &dyn std::fmt::Display| QueryError::Jit(m.to_string());
        let mut fb = settings::builder();
        fb.set("use_colocated_libcalls", "false")
            .map_err(|x| e(&x))?;
        fb.set("is_pic", "false").map_err(|x| e(&x))?;
        fb.set("opt_level", "speed").map_err(|x| e(&x))?;
        let isa = cranelift_native::builder()
            .map_err(|x| e(&x))?
            .finish(settings::Flags::new(fb))
            .map_err(|x| e(&x))?;
        let mut jb = JITBuilder::with_isa(isa, default_libcall_names());
        for (name, ptr) in callout_symbols() {
            jb.symbol(name, ptr);
        }
        let mut module = JITModule::new(jb);
        let ptr_ty = module.target_config().pointer_type();
        let mut ctx = module.make_context();
        let mut sig = module.make_signature();
        sig.params.push(AbiParam::new(types::I64));
        sig.params.push(AbiParam::new(ptr_ty));
        sig.params.push(AbiParam::new(ptr_ty));
        let fid = module
            .declare_function("tessera_query_map", Linkage::Local, &sig)
            .map_err(|x| e(&x))?;
        ctx.func.signature = sig;
        ctx.func.name = UserFuncName::user(0, fid.as_u32());
        let mut fctx = FunctionBuilderContext::new();
        {
            let mut b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
            let mut em = Emitter {
                ir,
                callouts: HashMap::new(),
                ptr_ty,
            };
            em.build(&mut b, &mut module, vector)?;
            b.seal_all_blocks();
            b.finalize(module.target_config());
        }
        module
            .define_function(fid, &mut ctx)
            .map_err(|x| e(&format!("{x:?}")))?;
        module.clear_context(&mut ctx);
        module.finalize_definitions().map_err(|x| e(&x))?;
        let entry = module.get_finalized_function(fid);
        Ok(JitKernel {
            module: Some(module),
            entry,
            precision: ir.precision,
            n_fields: ir.n_fields,
            vectorized: vector,
        })
    }

    /// Runs the kernel. `fields[i]` and `out` must all have the same length and element type
    /// of `self.precision` (checked by the caller, [`crate::Query`]).
    pub(crate) fn run_raw(&self, n: usize, fields: &[*const u8], out: *mut u8) {
        debug_assert_eq!(fields.len(), self.n_fields);
        // SAFETY: `entry` is the finalized function with signature `MapFn`; it reads `n`
        // elements from each of the `n_fields` input pointers and writes `n` to `out`, and
        // the caller guarantees those ranges are valid.
        unsafe {
            let f: MapFn = std::mem::transmute(self.entry);
            f(n as i64, fields.as_ptr(), out)
        }
    }
}

fn callout_symbols() -> Vec<(&'static str, *const u8)> {
    use callout::*;
    vec![
        ("q_exp_f32", exp_f32 as *const u8),
        ("q_log_f32", log_f32 as *const u8),
        ("q_log2_f32", log2_f32 as *const u8),
        ("q_sin_f32", sin_f32 as *const u8),
        ("q_cos_f32", cos_f32 as *const u8),
        ("q_tan_f32", tan_f32 as *const u8),
        ("q_asin_f32", asin_f32 as *const u8),
        ("q_acos_f32", acos_f32 as *const u8),
        ("q_atan_f32", atan_f32 as *const u8),
        ("q_pow_f32", pow_f32 as *const u8),
        ("q_atan2_f32", atan2_f32 as *const u8),
        ("q_exp_f64", exp_f64 as *const u8),
        ("q_log_f64", log_f64 as *const u8),
        ("q_log2_f64", log2_f64 as *const u8),
        ("q_sin_f64", sin_f64 as *const u8),
        ("q_cos_f64", cos_f64 as *const u8),
        ("q_tan_f64", tan_f64 as *const u8),
        ("q_asin_f64", asin_f64 as *const u8),
        ("q_acos_f64", acos_f64 as *const u8),
        ("q_atan_f64", atan_f64 as *const u8),
        ("q_pow_f64", pow_f64 as *const u8),
        ("q_atan2_f64", atan2_f64 as *const u8),
    ]
}

struct Emitter<'a> {
    ir: &'a Ir,
    callouts: HashMap<&'static str, FuncId>,
    ptr_ty: Type,
}

impl Emitter<'_> {
    fn build(
        &mut self,
        b: &mut FunctionBuilder,
        module: &mut JITModule,
        vector: bool,
    ) -> Result<(), QueryError> {
        let (st, vt, mask_t, lanes, shift) = match self.ir.precision {
            Precision::F32 => (types::F32, types::F32X4, types::I32X4, 4i64, 2i64),
            Precision::F64 => (types::F64, types::F64X2, types::I64X2, 2i64, 3i64),
        };
        let entry = b.create_block();
        b.append_block_params_for_function_params(entry);
        b.switch_to_block(entry);
        let n = b.block_params(entry)[0];
        let inp = b.block_params(entry)[1];
        let out = b.block_params(entry)[2];
        let flags = MemFlagsData::new().with_notrap();
        let mut ptrs = HashMap::new();
        for f in self.ir.used_fields() {
            let p = b.ins().load(self.ptr_ty, flags, inp, (f as i32) * 8);
            ptrs.insert(f, p);
        }
        let tail_head = b.create_block();
        b.append_block_param(tail_head, types::I64);
        let tail_body = b.create_block();
        let exit = b.create_block();
        let zero = b.ins().iconst(types::I64, 0);
        if vector {
            let nvec = b.ins().band_imm_s(n, -lanes);
            let vhead = b.create_block();
            b.append_block_param(vhead, types::I64);
            let vbody = b.create_block();
            b.ins().jump(vhead, &[zero.into()]);
            b.switch_to_block(vhead);
            let i = b.block_params(vhead)[0];
            let c = b.ins().icmp(IntCC::SignedLessThan, i, nvec);
            b.ins().brif(c, vbody, &[], tail_head, &[i.into()]);
            b.switch_to_block(vbody);
            let off = b.ins().ishl_imm_s(i, shift);
            let r = self.body(b, module, &ptrs, off, vt, st, Some((mask_t, lanes as u8)))?;
            let addr = b.ins().iadd(out, off);
            b.ins().store(flags, r, addr, 0);
            let i2 = b.ins().iadd_imm_s(i, lanes);
            b.ins().jump(vhead, &[i2.into()]);
        } else {
            b.ins().jump(tail_head, &[zero.into()]);
        }
        b.switch_to_block(tail_head);
        let j = b.block_params(tail_head)[0];
        let c = b.ins().icmp(IntCC::SignedLessThan, j, n);
        b.ins().brif(c, tail_body, &[], exit, &[]);
        b.switch_to_block(tail_body);
        let off = b.ins().ishl_imm_s(j, shift);
        let r = self.body(b, module, &ptrs, off, st, st, None)?;
        let addr = b.ins().iadd(out, off);
        b.ins().store(flags, r, addr, 0);
        let j2 = b.ins().iadd_imm_s(j, 1);
        b.ins().jump(tail_head, &[j2.into()]);
        b.switch_to_block(exit);
        b.ins().return_(&[]);
        Ok(())
    }

    fn callout(
        &mut self,
        b: &mut FunctionBuilder,
        module: &mut JITModule,
        name: &'static str,
        st: Type,
        arity: usize,
    ) -> Result<cranelift_codegen::ir::FuncRef, QueryError> {
        let id = match self.callouts.get(name) {
            Some(id) => *id,
            None => {
                let mut sig = module.make_signature();
                for _ in 0..arity {
                    sig.params.push(AbiParam::new(st));
                }
                sig.returns.push(AbiParam::new(st));
                let id = module
                    .declare_function(name, Linkage::Import, &sig)
                    .map_err(|x| QueryError::Jit(x.to_string()))?;
                self.callouts.insert(name, id);
                id
            }
        };
        Ok(module.declare_func_in_func(id, b.func))
    }

    /// Emits the expression for one vector (`vec = Some((mask type, lanes))`) or one scalar.
    #[allow(clippy::too_many_arguments)]
    fn body(
        &mut self,
        b: &mut FunctionBuilder,
        module: &mut JITModule,
        ptrs: &HashMap<u32, Value>,
        off: Value,
        ty: Type,
        st: Type,
        vec: Option<(Type, u8)>,
    ) -> Result<Value, QueryError> {
        let flags = MemFlagsData::new().with_notrap();
        let f64p = st == types::F64;
        let sfx = if f64p { "f64" } else { "f32" };
        let konst = |b: &mut FunctionBuilder, v: f64| {
            let s = if f64p {
                b.ins().f64const(v)
            } else {
                b.ins().f32const(v as f32)
            };
            if vec.is_some() {
                b.ins().splat(ty, s)
            } else {
                s
            }
        };
        // float compare -> lane mask usable by select/bitselect
        let mut vals: Vec<Value> = Vec::with_capacity(self.ir.insts.len());
        for inst in &self.ir.insts {
            let v = match *inst {
                Inst::Const(bits) => konst(b, f64::from_bits(bits)),
                Inst::Field(f) => {
                    let addr = b.ins().iadd(ptrs[&f], off);
                    b.ins().load(ty, flags, addr, 0)
                }
                Inst::Un(op, a) => {
                    let a = vals[a as usize];
                    match op {
                        Un::Neg => b.ins().fneg(a),
                        Un::Abs => b.ins().fabs(a),
                        Un::Sqrt => b.ins().sqrt(a),
                        Un::Floor => b.ins().floor(a),
                        Un::Ceil => b.ins().ceil(a),
                        _ => {
                            let name: &'static str = match (op, f64p) {
                                (Un::Exp, false) => "q_exp_f32",
                                (Un::Log, false) => "q_log_f32",
                                (Un::Log2, false) => "q_log2_f32",
                                (Un::Sin, false) => "q_sin_f32",
                                (Un::Cos, false) => "q_cos_f32",
                                (Un::Tan, false) => "q_tan_f32",
                                (Un::Asin, false) => "q_asin_f32",
                                (Un::Acos, false) => "q_acos_f32",
                                (Un::Atan, false) => "q_atan_f32",
                                (Un::Exp, true) => "q_exp_f64",
                                (Un::Log, true) => "q_log_f64",
                                (Un::Log2, true) => "q_log2_f64",
                                (Un::Sin, true) => "q_sin_f64",
                                (Un::Cos, true) => "q_cos_f64",
                                (Un::Tan, true) => "q_tan_f64",
                                (Un::Asin, true) => "q_asin_f64",
                                (Un::Acos, true) => "q_acos_f64",
                                (Un::Atan, true) => "q_atan_f64",
                                _ => unreachable!("{sfx}"),
                            };
                            let fr = self.callout(b, module, name, st, 1)?;
                            self.lanewise(b, fr, &[a], vec)
                        }
                    }
                }
                Inst::Bin(op, a, c) => {
                    let (x, y) = (vals[a as usize], vals[c as usize]);
                    match op {
                        Bin::Add => b.ins().fadd(x, y),
                        Bin::Sub => b.ins().fsub(x, y),
                        Bin::Mul => b.ins().fmul(x, y),
                        Bin::Div => b.ins().fdiv(x, y),
                        Bin::Pow | Bin::Atan2 => {
                            let name = match (op, f64p) {
                                (Bin::Pow, false) => "q_pow_f32",
                                (Bin::Pow, true) => "q_pow_f64",
                                (_, false) => "q_atan2_f32",
                                (_, true) => "q_atan2_f64",
                            };
                            let fr = self.callout(b, module, name, st, 2)?;
                            self.lanewise(b, fr, &[x, y], vec)
                        }
                        Bin::Min | Bin::Max => {
                            // min: b if (b < a) or a is NaN, else a (see crate::ast)
                            let cc = if op == Bin::Min {
                                FloatCC::LessThan
                            } else {
                                FloatCC::GreaterThan
                            };
                            let m1 = b.ins().fcmp(cc, y, x);
                            let m2 = b.ins().fcmp(FloatCC::Unordered, x, x);
                            let m = b.ins().bor(m1, m2);
                            self.select_mask(b, m, y, x, ty, vec)
                        }
                        _ => {
                            let cc = match op {
                                Bin::Lt => FloatCC::LessThan,
                                Bin::Le => FloatCC::LessThanOrEqual,
                                Bin::Gt => FloatCC::GreaterThan,
                                Bin::Ge => FloatCC::GreaterThanOrEqual,
                                Bin::Eq => FloatCC::Equal,
                                _ => FloatCC::NotEqual,
                            };
                            let m = b.ins().fcmp(cc, x, y);
                            let one = konst(b, 1.0);
                            let zero = konst(b, 0.0);
                            self.select_mask(b, m, one, zero, ty, vec)
                        }
                    }
                }
                Inst::Select(c, x, y) => {
                    let zero = konst(b, 0.0);
                    let m = b.ins().fcmp(FloatCC::NotEqual, vals[c as usize], zero);
                    self.select_mask(b, m, vals[x as usize], vals[y as usize], ty, vec)
                }
            };
            vals.push(v);
        }
        Ok(vals[self.ir.result as usize])
    }

    fn select_mask(
        &self,
        b: &mut FunctionBuilder,
        m: Value,
        x: Value,
        y: Value,
        ty: Type,
        vec: Option<(Type, u8)>,
    ) -> Value {
        match vec {
            None => b.ins().select(m, x, y),
            Some(_) => {
                let fm = b.ins().bitcast(ty, MemFlagsData::new(), m);
                b.ins().bitselect(fm, x, y)
            }
        }
    }

    fn lanewise(
        &self,
        b: &mut FunctionBuilder,
        fr: cranelift_codegen::ir::FuncRef,
        args: &[Value],
        vec: Option<(Type, u8)>,
    ) -> Value {
        match vec {
            None => {
                let call = b.ins().call(fr, args);
                b.inst_results(call)[0]
            }
            Some((_, lanes)) => {
                let mut acc = args[0];
                for l in 0..lanes {
                    let xs: Vec<Value> = args.iter().map(|&a| b.ins().extractlane(a, l)).collect();
                    let call = b.ins().call(fr, &xs);
                    let r = b.inst_results(call)[0];
                    acc = b.ins().insertlane(acc, r, l);
                }
                acc
            }
        }
    }
}
