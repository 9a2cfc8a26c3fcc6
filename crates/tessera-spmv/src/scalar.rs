//! Scalar precisions of compound entries: single (f32) and double (f64), dissertation §5.4.

use std::fmt;
use std::ops::{Add, Mul, Neg, Sub};
use std::str::FromStr;

use crate::error::SpmvError;

/// Floating point precision of the entry fields (dissertation §5.4: "single and double precision").
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub enum Precision {
    /// IEEE binary32, CUDA `float`.
    F32,
    /// IEEE binary64, CUDA `double`.
    F64,
}

impl Precision {
    /// Size of one scalar in bytes.
    pub fn bytes(self) -> usize {
        match self {
            Precision::F32 => 4,
            Precision::F64 => 8,
        }
    }
    /// CUDA C type name.
    pub fn cuda_type(self) -> &'static str {
        match self {
            Precision::F32 => "float",
            Precision::F64 => "double",
        }
    }
    /// Short lowercase name (`f32`, `f64`).
    pub fn name(self) -> &'static str {
        match self {
            Precision::F32 => "f32",
            Precision::F64 => "f64",
        }
    }
    /// Both precisions, single first.
    pub const ALL: [Precision; 2] = [Precision::F32, Precision::F64];
}

impl fmt::Display for Precision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Precision {
    type Err = SpmvError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "f32" | "single" | "float" => Ok(Precision::F32),
            "f64" | "double" => Ok(Precision::F64),
            _ => Err(SpmvError::BadOption {
                what: "precision",
                value: s.to_string(),
                expected: "f32 or f64".into(),
            }),
        }
    }
}

/// A floating point scalar usable as an entry field (f32 or f64).
pub trait Scalar:
    Copy
    + Default
    + PartialEq
    + PartialOrd
    + fmt::Debug
    + Send
    + Sync
    + 'static
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Neg<Output = Self>
    + tessera_gpu::Element
{
    /// The precision this type stands for.
    const PRECISION: Precision;
    /// Rounds an f64 to this type.
    fn from_f64(v: f64) -> Self;
    /// Widens to f64.
    fn to_f64(self) -> f64;
    /// Absolute value.
    fn abs(self) -> Self;
    /// Unit roundoff of the type.
    const EPS: f64;
}

impl Scalar for f32 {
    const PRECISION: Precision = Precision::F32;
    fn from_f64(v: f64) -> Self {
        v as f32
    }
    fn to_f64(self) -> f64 {
        self as f64
    }
    fn abs(self) -> Self {
        f32::abs(self)
    }
    const EPS: f64 = f32::EPSILON as f64;
}

impl Scalar for f64 {
    const PRECISION: Precision = Precision::F64;
    fn from_f64(v: f64) -> Self {
        v
    }
    fn to_f64(self) -> f64 {
        self
    }
    fn abs(self) -> Self {
        f64::abs(self)
    }
    const EPS: f64 = f64::EPSILON;
}
