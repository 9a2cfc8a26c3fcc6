//! Parallel schedules of the generated SpMV (dissertation §5.3.2-5.3.3): static (block b
//! processes chunks of n_t rows with stride n_s * n_b * n_t) or dynamic (blocks fetch chunks
//! of n_t rows from an atomic counter); n_b blocks per SM and n_t threads per block are
//! compile-time constants (`__launch_bounds__(n_t, n_b)`).

use std::fmt;
use std::str::FromStr;

use crate::error::{Result, SpmvError};

/// Static or dynamic chunk assignment.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub enum ScheduleKind {
    Static,
    Dynamic,
}

impl fmt::Display for ScheduleKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ScheduleKind::Static => "static",
            ScheduleKind::Dynamic => "dynamic",
        })
    }
}

impl FromStr for ScheduleKind {
    type Err = SpmvError;
    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "static" => Ok(ScheduleKind::Static),
            "dynamic" => Ok(ScheduleKind::Dynamic),
            _ => Err(SpmvError::BadOption {
                what: "schedule",
                value: s.into(),
                expected: "static or dynamic".into(),
            }),
        }
    }
}

/// A schedule: kind, blocks per SM n_b, threads per block n_t.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub struct Schedule {
    pub kind: ScheduleKind,
    pub n_b: u32,
    pub n_t: u32,
}

impl Schedule {
    /// Name of the generated kernel for this schedule.
    pub fn kernel_name(&self) -> String {
        format!("tessera_spmv_{}_nt{}_nb{}", self.kind, self.n_t, self.n_b)
    }
    /// Threads per SM, n_t * n_b (the diagonal of seed 002 §5.4).
    pub fn threads_per_sm(&self) -> u32 {
        self.n_t * self.n_b
    }
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} nb={} nt={}", self.kind, self.n_b, self.n_t)
    }
}

/// What the autotuner needs to know about the GPU (§5.3.3: compute capability and SM count
/// determine the warp size and the bounds of n_b and n_t).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DeviceLimits {
    /// Device name, e.g. "NVIDIA H100 80GB HBM3".
    pub name: String,
    /// Compute capability major, minor.
    pub cc: (u32, u32),
    /// Number of SMs n_s.
    pub n_sm: u32,
    pub warp: u32,
    pub max_threads_per_block: u32,
    pub max_threads_per_sm: u32,
    pub max_blocks_per_sm: u32,
}

impl DeviceLimits {
    /// Limits of an H100 SXM (CC 9.0, 132 SMs): used for code generation without a GPU.
    pub fn h100() -> Self {
        DeviceLimits {
            name: "NVIDIA H100 (assumed)".into(),
            cc: (9, 0),
            n_sm: 132,
            warp: 32,
            max_threads_per_block: 1024,
            max_threads_per_sm: 2048,
            max_blocks_per_sm: 32,
        }
    }
    /// `sm_XY` architecture name.
    pub fn sm(&self) -> String {
        format!("sm_{}{}", self.cc.0, self.cc.1)
    }

    /// n_b candidates: all 2^i and 3*2^i within the blocks-per-SM bound (§5.3.3).
    pub fn nb_candidates(&self) -> Vec<u32> {
        pow2_and_3pow2(1, self.max_blocks_per_sm)
    }
    /// n_t candidates: all w*2^i and w*3*2^i within the threads-per-block bound (§5.3.3).
    pub fn nt_candidates(&self) -> Vec<u32> {
        pow2_and_3pow2(1, self.max_threads_per_block / self.warp)
            .into_iter()
            .map(|m| m * self.warp)
            .collect()
    }
    /// Checks a schedule against the device limits.
    pub fn check(&self, s: &Schedule) -> Result<()> {
        let bad = |msg: String| {
            Err(SpmvError::BadSchedule {
                n_b: s.n_b,
                n_t: s.n_t,
                msg,
            })
        };
        if s.n_t == 0 || s.n_b == 0 {
            return bad("n_b and n_t must be positive".into());
        }
        if s.n_t % self.warp != 0 || s.n_t > self.max_threads_per_block {
            return bad(format!(
                "n_t must be a multiple of {} and at most {}",
                self.warp, self.max_threads_per_block
            ));
        }
        if s.n_b > self.max_blocks_per_sm || s.n_t * s.n_b > self.max_threads_per_sm {
            return bad(format!(
                "at most {} blocks and {} threads per SM",
                self.max_blocks_per_sm, self.max_threads_per_sm
            ));
        }
        Ok(())
    }
    /// The full schedule space: kind x n_b x n_t with n_b * n_t within the threads-per-SM bound.
    pub fn all_schedules(&self) -> Vec<Schedule> {
        let mut v = Vec::new();
        for kind in [ScheduleKind::Static, ScheduleKind::Dynamic] {
            for &n_b in &self.nb_candidates() {
                for &n_t in &self.nt_candidates() {
                    let s = Schedule { kind, n_b, n_t };
                    if self.check(&s).is_ok() {
                        v.push(s);
                    }
                }
            }
        }
        v
    }
    /// The fast search space along diagonals of constant threads per SM (seed 002 §5.4: "the
    /// schedule tuning graphs are close to constant along diagonals of constant thread number per
    /// SM"): per kind and per threads-per-SM value T one representative, the n_t closest to
    /// 256 (the middle of the n_t range) with n_b = T / n_t a valid candidate.
    pub fn diagonal_schedules(&self) -> Vec<Schedule> {
        let all = self.all_schedules();
        let mut tps: Vec<u32> = all.iter().map(|s| s.threads_per_sm()).collect();
        tps.sort_unstable();
        tps.dedup();
        let mut v = Vec::new();
        for kind in [ScheduleKind::Static, ScheduleKind::Dynamic] {
            for &t in &tps {
                let best = all
                    .iter()
                    .filter(|s| s.kind == kind && s.threads_per_sm() == t)
                    .min_by_key(|s| ((s.n_t as i64 - 256).abs(), s.n_t));
                if let Some(s) = best {
                    v.push(*s);
                }
            }
        }
        v
    }
}

fn pow2_and_3pow2(lo: u32, hi: u32) -> Vec<u32> {
    let mut v = Vec::new();
    let mut p = 1u32;
    while p <= hi {
        if p >= lo {
            v.push(p);
        }
        if 3 * p <= hi && 3 * p >= lo {
            v.push(3 * p);
        }
        p *= 2;
    }
    v.sort_unstable();
    v.dedup();
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn candidate_sets() {
        let d = DeviceLimits::h100();
        assert_eq!(d.nb_candidates(), vec![1, 2, 3, 4, 6, 8, 12, 16, 24, 32]);
        assert_eq!(
            d.nt_candidates(),
            vec![32, 64, 96, 128, 192, 256, 384, 512, 768, 1024]
        );
        let all = d.all_schedules();
        assert!(all.iter().all(|s| s.n_t * s.n_b <= 2048));
        assert!(all.contains(&Schedule {
            kind: ScheduleKind::Dynamic,
            n_b: 2,
            n_t: 1024
        }));
        assert!(!all.contains(&Schedule {
            kind: ScheduleKind::Static,
            n_b: 3,
            n_t: 1024
        }));
        let diag = d.diagonal_schedules();
        assert!(diag.len() < all.len() / 2);
        // one per (kind, threads per SM)
        let mut keys: Vec<_> = diag.iter().map(|s| (s.kind, s.threads_per_sm())).collect();
        let n = keys.len();
        keys.dedup();
        assert_eq!(keys.len(), n);
        assert!(d
            .check(&Schedule {
                kind: ScheduleKind::Static,
                n_b: 64,
                n_t: 32
            })
            .is_err());
        assert!(d
            .check(&Schedule {
                kind: ScheduleKind::Static,
                n_b: 1,
                n_t: 48
            })
            .is_err());
    }
}
