//! SpMV code generation and autotuning for compound entries (dissertation Chapter 5).
