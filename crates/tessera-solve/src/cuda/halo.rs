//! Halo exchange kernels of a domain-decomposed operator (dissertation §7.1.2): gather the
//! owned values a neighbour needs into a contiguous send buffer ([`halo_pack`]) and scatter the
//! received values into the halo part of a domain's vector ([`halo_unpack`]). Vectors are
//! node-major with `e` components per node; index lists are local node numbers. The CPU
//! references are [`halo_pack_reference`] and [`halo_unpack_reference`].

use tessera_gpu::{DeviceBuffer, Gpu};

use super::{cfg, to_u32, SolveKernels, BLOCK};
use crate::error::SolveError;

fn check(what: &str, need: usize, have: usize) -> Result<(), SolveError> {
    if need > have {
        return Err(SolveError::InvalidInput {
            what: "halo exchange",
            message: format!("{what} needs {need} elements, the buffer has {have}"),
        });
    }
    Ok(())
}

/// `buf[i e + c] = x[idx[i] e + c]` for the first `count` entries of `idx`, launched on `on`
/// (a stream of the device the kernels `k` were compiled for). Every `idx` entry must be a node
/// of `x` (`< x.len() / e`; the kernel does not check).
pub fn halo_pack(
    k: &SolveKernels<'_>,
    on: &Gpu,
    count: usize,
    e: usize,
    idx: &DeviceBuffer<u32>,
    x: &DeviceBuffer<f64>,
    buf: &mut DeviceBuffer<f64>,
) -> Result<(), SolveError> {
    check("the index list", count, idx.len())?;
    check("the send buffer", count * e, buf.len())?;
    if count == 0 {
        return Ok(());
    }
    let (c32, e32) = (to_u32(count, "halo nodes")?, to_u32(e, "block size")?);
    to_u32(count * e, "halo values")?;
    on.launch(&k.k("halo_pack")?, cfg(count * e, BLOCK)?)
        .arg(&c32)
        .arg(&e32)
        .arg(idx)
        .arg(x)
        .arg(&*buf)
        .run()?;
    Ok(())
}

/// `x[idx[i] e + c] = buf[i e + c]` for the first `count` entries of `idx`, launched on `on`.
/// Every `idx` entry must be a node of `x`; entries must be distinct.
pub fn halo_unpack(
    k: &SolveKernels<'_>,
    on: &Gpu,
    count: usize,
    e: usize,
    idx: &DeviceBuffer<u32>,
    buf: &DeviceBuffer<f64>,
    x: &mut DeviceBuffer<f64>,
) -> Result<(), SolveError> {
    check("the index list", count, idx.len())?;
    check("the receive buffer", count * e, buf.len())?;
    if count == 0 {
        return Ok(());
    }
    let (c32, e32) = (to_u32(count, "halo nodes")?, to_u32(e, "block size")?);
    to_u32(count * e, "halo values")?;
    on.launch(&k.k("halo_unpack")?, cfg(count * e, BLOCK)?)
        .arg(&c32)
        .arg(&e32)
        .arg(idx)
        .arg(buf)
        .arg(&*x)
        .run()?;
    Ok(())
}

/// CPU reference of [`halo_pack`]: the send buffer of `idx`.
pub fn halo_pack_reference(idx: &[u32], e: usize, x: &[f64]) -> Vec<f64> {
    let mut out = Vec::with_capacity(idx.len() * e);
    for &i in idx {
        out.extend_from_slice(&x[i as usize * e..(i as usize + 1) * e]);
    }
    out
}

/// CPU reference of [`halo_unpack`].
pub fn halo_unpack_reference(idx: &[u32], e: usize, buf: &[f64], x: &mut [f64]) {
    for (n, &i) in idx.iter().enumerate() {
        x[i as usize * e..(i as usize + 1) * e].copy_from_slice(&buf[n * e..(n + 1) * e]);
    }
}
