//! CUDA runtime for Tessera (DESIGN.md: "the only crate that touches cudarc").
