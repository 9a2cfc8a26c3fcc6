//! The near-null space of 3D linear elasticity: the six rigid-body modes.
//!
//! A rigid motion `u(x) = t + ω × (x − c)` has zero strain, so `K u = 0` for the stiffness
//! matrix of an unconstrained body. Smoothed aggregation interpolates these modes exactly
//! on every level (see [`crate::amg`]). The modes are linear fields, so for Bernstein-Bézier
//! elements of any order their coefficients are their values at the control points
//! (dissertation §4.3: BB coefficients reproduce linear fields); the modes computed from
//! the control-point positions are exact.

/// Which near-null-space vectors the aggregation interpolates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum NearNullSpace {
    /// The 3 translations and the 3 rotations (6 vectors): the right choice for elasticity.
    #[default]
    RigidBody,
    /// The 3 translations only (3 vectors), as for a vector Laplacian.
    Translations,
}

impl NearNullSpace {
    /// Number of vectors.
    pub fn dim(self) -> usize {
        match self {
            NearNullSpace::RigidBody => 6,
            NearNullSpace::Translations => 3,
        }
    }
    /// Name as in the problem file.
    pub fn name(self) -> &'static str {
        match self {
            NearNullSpace::RigidBody => "rigid-body",
            NearNullSpace::Translations => "translations",
        }
    }
}

/// The near-null-space vectors at node `positions` (3 DOFs per node, node-major), restricted
/// to the free DOFs (rows of `fixed` DOFs are zero). Row-major, `space.dim()` values per DOF:
/// `b[dof · m + k]`. Columns: translations x, y, z, then rotations about x, y, z through
/// the centroid, with lengths scaled by the largest distance from it (so entries are O(1)).
pub fn rigid_body_modes(positions: &[[f64; 3]], fixed: &[bool], space: NearNullSpace) -> Vec<f64> {
    let n = positions.len();
    let m = space.dim();
    let mut c = [0.0; 3];
    for p in positions {
        for k in 0..3 {
            c[k] += p[k];
        }
    }
    for ck in &mut c {
        *ck /= n.max(1) as f64;
    }
    let scale = positions
        .iter()
        .flat_map(|p| (0..3).map(move |k| (p[k] - c[k]).abs()))
        .fold(0.0f64, f64::max)
        .max(f64::MIN_POSITIVE);
    let mut b = vec![0.0; 3 * n * m];
    for (i, p) in positions.iter().enumerate() {
        let q = [
            (p[0] - c[0]) / scale,
            (p[1] - c[1]) / scale,
            (p[2] - c[2]) / scale,
        ];
        // e_x × q = (0, -qz, qy), e_y × q = (qz, 0, -qx), e_z × q = (-qy, qx, 0)
        let rot = [[0.0, q[2], -q[1]], [-q[2], 0.0, q[0]], [q[1], -q[0], 0.0]];
        for comp in 0..3 {
            let dof = 3 * i + comp;
            if fixed.get(dof).copied().unwrap_or(false) {
                continue;
            }
            let row = &mut b[dof * m..(dof + 1) * m];
            row[comp] = 1.0;
            if m == 6 {
                // component `comp` of (e_a × q) for a = x, y, z
                for a in 0..3 {
                    row[3 + a] = rot[comp][a];
                }
            }
        }
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotations_are_cross_products() {
        let pos = [
            [0.0, 0.0, 0.0],
            [2.0, 0.0, 0.0],
            [0.0, 2.0, 0.0],
            [0.0, 0.0, 2.0],
        ];
        let b = rigid_body_modes(&pos, &[false; 12], NearNullSpace::RigidBody);
        // centroid (0.5, 0.5, 0.5), scale 1.5; node 1: q = (1, -1/3, -1/3)
        let q = [1.0, -1.0 / 3.0, -1.0 / 3.0];
        let w = [
            [0.0, -q[2], q[1]], // e_x × q
            [q[2], 0.0, -q[0]], // e_y × q
            [-q[1], q[0], 0.0], // e_z × q
        ];
        for comp in 0..3 {
            for a in 0..3 {
                assert!((b[(3 + comp) * 6 + 3 + a] - w[a][comp]).abs() < 1e-15);
            }
            assert_eq!(b[(3 + comp) * 6 + comp], 1.0);
        }
        let mut fixed = [false; 12];
        fixed[4] = true;
        let b = rigid_body_modes(&pos, &fixed, NearNullSpace::Translations);
        assert_eq!(b.len(), 36);
        assert_eq!(&b[12..15], &[0.0, 0.0, 0.0]);
        assert_eq!(&b[15..18], &[0.0, 0.0, 1.0]);
    }
}
