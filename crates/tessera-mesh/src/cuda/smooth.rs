//! Safe ("smart") Laplacian smoothing on the GPU (dissertation §3.4.2 with the shape test
//! of [`crate::smooth`]): the Laplacian candidates come from the plain step's kernel
//! (`laplace_step`, one thread per vertex over δ1), then `kernels/smooth.cu` computes the
//! shape measure of every cell, runs the synchronous rejection rounds (one thread per cell;
//! one 4-byte read-back per round to learn whether anything changed) and applies the
//! accepted moves. Positions, rejected moves and round counts equal the CPU reference
//! [`crate::smooth::safe_smoothed_positions`] exactly (conformance test
//! `smooth_safe_matches_reference`): the kernels repeat its operations in its order and are
//! compiled without FMA contraction.

use super::{DeviceMesh, MeshKernels};
use crate::smooth::{SafeSetup, SafeStats};
use crate::MeshError;
use tessera_gpu::{CompileOptions, LaunchConfig};

/// CUDA source of the safe-smoothing kernels (deterministic: a constant).
pub const SOURCE: &str = include_str!("kernels/smooth.cu");

/// Kernels `SOURCE` defines and the Rust side launches.
pub const KERNELS: &[&str] = &["safe_cell_q", "safe_check", "safe_apply"];

impl DeviceMesh<'_> {
    /// `iterations` safe smoothing steps on the device positions (see [`crate::smooth`]);
    /// `setup` comes from the same mesh on the host ([`SafeSetup::new`]).
    pub fn safe_smooth(
        &mut self,
        setup: &SafeSetup,
        iterations: usize,
    ) -> Result<SafeStats, MeshError> {
        let nv = self.nvertices;
        let st = &setup.stencil;
        let nc = st.num_cells();
        if setup.moving.len() != nv || st.vert_offsets.len() != self.num_cells() + 1 {
            return Err(MeshError::Unsupported(
                "safe smoothing setup does not belong to this device mesh".into(),
            ));
        }
        let mut stats = SafeStats {
            movable_vertices: setup.moving.iter().filter(|&&m| m).count() as u64,
            ..Default::default()
        };
        if iterations == 0 || nv == 0 {
            return Ok(stats);
        }
        // the neighbours of the plain smoothing's stencil where it is cached, else their launch
        self.require_vertex_edges()?;
        let own_nbr;
        let nbr = if let Some((_, n)) = &self.cache.smoothing_stencil {
            n
        } else {
            own_nbr = self.vertex_neighbours()?;
            &own_nbr
        };
        let g = self.kernels.gpu;
        let mut opts = CompileOptions::named("tessera_smooth.cu");
        // the CPU reference's rounding: no contraction of a * b + c into FMA
        opts.extra.push("--fmad=false".into());
        let module = g.compile(SOURCE, &opts)?;
        let (k_q, k_check, k_apply) = (
            module.function("safe_cell_q")?,
            module.function("safe_check")?,
            module.function("safe_apply")?,
        );
        let step = self.kernels.k("laplace_step")?;
        let moving: Vec<u32> = setup.moving.iter().map(|&m| m as u32).collect();
        let fixed: Vec<u32> = setup.moving.iter().map(|&m| (!m) as u32).collect();
        let d_moving = g.upload(&moving)?;
        let d_fixed = g.upload(&fixed)?;
        let voffs = g.upload(&st.vert_offsets)?;
        let verts = g.upload(&st.verts)?;
        let loffs = g.upload(&st.loop_offsets)?;
        // a zero-length buffer cannot be allocated on every driver: pad the loop stream
        let loops = if st.loops.is_empty() {
            g.upload(&[0u32])?
        } else {
            g.upload(&st.loops)?
        };
        let cand = g.alloc::<f64>(3 * nv)?;
        let mut out = g.alloc::<f64>(3 * nv)?;
        let q_old = g.alloc::<f64>(nc.max(1))?;
        let mut changed = g.zeros::<u32>(1)?;
        let (nvu, ncu) = (nv as u64, nc as u64);
        let (cube_q, tau) = (st.cube_q, setup.tau_q);
        let vcfg = MeshKernels::cfg(nv)?;
        let ccfg = if nc > 0 {
            Some(LaunchConfig::for_items(nc, 256)?)
        } else {
            None
        };
        let prims = self.kernels.primitives();
        for _ in 0..iterations {
            let ve = self.cache.vertex_edges.as_ref().expect("required above");
            g.launch(&step, vcfg)
                .arg(&ve.offsets)
                .arg(nbr)
                .arg(&d_fixed)
                .arg(&self.positions)
                .arg(&cand)
                .arg(&nvu)
                .run()?;
            let mut rejected = g.zeros::<u32>(nv)?;
            if let Some(ccfg) = ccfg {
                g.launch(&k_q, ccfg)
                    .arg(&voffs)
                    .arg(&verts)
                    .arg(&loffs)
                    .arg(&loops)
                    .arg(&cube_q)
                    .arg(&self.positions)
                    .arg(&ncu)
                    .arg(&q_old)
                    .run()?;
                // every round that goes on rejects at least one more move, so a step
                // settles within `nv + 1` rounds; more means the kernels disagree with
                // that invariant: an error, never an endless loop
                let mut rounds_here = 0usize;
                loop {
                    stats.rounds += 1;
                    rounds_here += 1;
                    if rounds_here > nv + 1 {
                        return Err(MeshError::Unsupported(format!(
                            "safe smoothing on the device did not settle within {} rounds",
                            nv + 1
                        )));
                    }
                    let next = g.duplicate(&rejected)?;
                    g.copy_to_device(&[0u32], &mut changed)?;
                    g.launch(&k_check, ccfg)
                        .arg(&voffs)
                        .arg(&verts)
                        .arg(&loffs)
                        .arg(&loops)
                        .arg(&cube_q)
                        .arg(&self.positions)
                        .arg(&cand)
                        .arg(&d_moving)
                        .arg(&rejected)
                        .arg(&q_old)
                        .arg(&tau)
                        .arg(&ncu)
                        .arg(&next)
                        .arg(&changed)
                        .run()?;
                    rejected = next;
                    if g.download_at(&changed, 0)? == 0 {
                        break;
                    }
                }
            }
            stats.rejected_moves += prims.reduce_sum_u32(&rejected)?;
            g.launch(&k_apply, vcfg)
                .arg(&self.positions)
                .arg(&cand)
                .arg(&d_moving)
                .arg(&rejected)
                .arg(&nvu)
                .arg(&out)
                .run()?;
            std::mem::swap(&mut self.positions, &mut out);
        }
        Ok(stats)
    }
}
