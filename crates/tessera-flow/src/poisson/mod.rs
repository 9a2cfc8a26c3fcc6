//! The pressure Poisson problem of the cut-cell fluid (dissertation §6.3.2, Eqs. 6.1-6.3) and
//! its Galerkin-consistent geometric multigrid solver (WMSF15).
//!
//! - [`level`]: Eq. 6.3 on one grid (open face areas, Dirichlet faces) and its
//!   rediscretization on the grid of twice the spacing, which equals `R A P`;
//! - [`multigrid`]: the hierarchy, the V-cycle, the coarsest-level direct solve, MGPCG and
//!   the enclosed-region (null space) handling;
//! - [`manufactured`]: Poisson problems with cut cells and known solutions, for accuracy
//!   checks (`tessera flow poisson`).

pub mod level;
pub mod manufactured;
pub mod multigrid;

pub use level::Level;
pub use multigrid::{CoarseSolver, FloatingRegions, Method, MgParams, Multigrid, SolveReport};

use crate::geometry::CutCells;
use crate::real::Real;

/// The finest level of Eq. 6.3 from measured cut cells: an interior face has weight `A_f / h`
/// (stored relative to `h^(d-2)`, so the open fraction itself), a boundary face on a side
/// whose `dirichlet[2 a + s]` is set (`s = 0` low, `1` high side of axis `a`) adds twice its
/// fraction to the diagonal (the value is prescribed half a cell away); other boundary faces
/// are Neumann faces.
pub fn finest_level<T: Real>(cut: &CutCells, dirichlet: [bool; 6]) -> Level<T> {
    let dims = cut.dims;
    let mut lev = Level::<T>::zeros(dims, cut.dim, 1);
    let [nx, ny, nz] = dims;
    for k in 0..nz {
        for j in 0..ny {
            for i in 0..nx {
                let c = i + nx * (j + ny * k);
                let ijk = [i, j, k];
                let mut d = 0.0;
                for a in 0..cut.dim {
                    let fd = CutCells::face_dims(dims, a);
                    let lo = i + fd[0] * (j + fd[1] * k);
                    let mut hi_ijk = ijk;
                    hi_ijk[a] += 1;
                    let hi = hi_ijk[0] + fd[0] * (hi_ijk[1] + fd[1] * hi_ijk[2]);
                    if ijk[a] > 0 {
                        lev.weights[a][c] = T::from_f64(cut.open[a][lo]);
                    } else if dirichlet[2 * a] {
                        d += 2.0 * cut.open[a][lo];
                    }
                    if ijk[a] + 1 == dims[a] && dirichlet[2 * a + 1] {
                        d += 2.0 * cut.open[a][hi];
                    }
                }
                lev.dirichlet[c] = T::from_f64(d);
            }
        }
    }
    lev
}
