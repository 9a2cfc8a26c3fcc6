//! The autotuner (dissertation §5.3.3) and its persistent tuning database.
//!
//! - **Full search**: the exhaustive joint search of the paper over layouts x schedule kinds x
//!   n_b x n_t (the Cartesian product within the device's limits).
//! - **Fast search**: seed 002 §5.4 observed that the schedule tuning graphs are close to
//!   constant along diagonals of constant threads per SM (n_t * n_b), so per layout and kind
//!   one schedule per diagonal is timed; then every (n_b, n_t) on the best diagonal of the best
//!   layout is timed.
//! - **Scoring** optionally weighs memory overhead (named as missing in §5.5 / seed 002 §6.1):
//!   `score = time * (bytes / bytes_CSR)^w`; w = 0 ranks by time alone.
//! - **Tuning database**: a JSON file (`$TESSERA_TUNING_DB`, else `<cache dir>/tessera/spmv-tuning.json`)
//!   keyed by GPU name, sm_XX, CUDA version, entry type, precision and matrix-class signature,
//!   and checked against a checksum of the candidate list, so a new matrix of a known class
//!   needs no search (§5.5: "similar matrices typically require similar layouts").

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::error::{Result, SpmvError};
use crate::layout::Layout;
use crate::schedule::{DeviceLimits, Schedule};

/// Search strategy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Search {
    /// Exhaustive joint layout x schedule search.
    Full,
    /// Diagonal (threads per SM) search, then the best diagonal in full.
    Fast,
}

impl std::str::FromStr for Search {
    type Err = SpmvError;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "full" => Ok(Search::Full),
            "fast" => Ok(Search::Fast),
            _ => Err(SpmvError::BadOption {
                what: "search",
                value: s.into(),
                expected: "full or fast".into(),
            }),
        }
    }
}

/// Knobs of the tuner.
#[derive(Clone, Debug)]
pub struct TuneParams {
    pub search: Search,
    /// Weight w of the memory overhead in the score (0 = time only).
    pub memory_weight: f64,
    /// Layouts to consider (default: all 16).
    pub layouts: Vec<Layout>,
    /// Ignore a database hit and search again (the result replaces the stored one).
    pub force: bool,
}

impl Default for TuneParams {
    fn default() -> Self {
        TuneParams {
            search: Search::Fast,
            memory_weight: 0.0,
            layouts: Layout::all(),
            force: false,
        }
    }
}

/// Times SpMV variants: for one layout, the median time in ms of each given schedule.
/// The GPU implementation compiles one module per layout; tests use synthetic timers.
pub trait VariantTimer {
    fn time(&mut self, layout: Layout, schedules: &[Schedule]) -> Result<Vec<f64>>;
}

/// One timed variant.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Candidate {
    pub layout: Layout,
    pub schedule: Schedule,
    pub time_ms: f64,
    /// Memory of the matrix arrays in this layout (bytes).
    pub memory_bytes: usize,
    /// `time * (memory / memory_CSR)^w`.
    pub score: f64,
}

/// The key of a tuning record.
#[derive(
    Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct TuningKey {
    pub gpu: String,
    pub sm: String,
    pub cuda: String,
    pub entry: String,
    pub precision: String,
    pub class: String,
}

impl TuningKey {
    fn id(&self) -> String {
        format!(
            "{}|{}|{}|{}|{}|{}",
            self.gpu, self.sm, self.cuda, self.entry, self.precision, self.class
        )
    }
}

/// A stored tuning result.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TuningRecord {
    pub key: TuningKey,
    /// Checksum of the candidate list searched; a different list invalidates the record.
    pub candidates_checksum: String,
    pub best: Candidate,
    pub search: Search,
    pub evaluated: usize,
    /// The matrix the record was tuned on.
    pub matrix: String,
    pub memory_weight: f64,
}

#[derive(Default, serde::Serialize, serde::Deserialize)]
struct DbFile {
    version: u32,
    records: BTreeMap<String, TuningRecord>,
}

/// The persistent tuning database.
pub struct TuningDb {
    path: PathBuf,
    file: DbFile,
}

impl TuningDb {
    /// `$TESSERA_TUNING_DB`, else `<cache dir>/tessera/spmv-tuning.json`.
    pub fn default_path() -> PathBuf {
        if let Some(p) = std::env::var_os("TESSERA_TUNING_DB") {
            return PathBuf::from(p);
        }
        dirs::cache_dir()
            .unwrap_or_else(std::env::temp_dir)
            .join("tessera")
            .join("spmv-tuning.json")
    }

    /// Opens (or starts) the database at `path`; a missing file is an empty database.
    pub fn open(path: &Path) -> Result<Self> {
        let err = |msg: String| SpmvError::TuningDb {
            path: path.to_path_buf(),
            msg,
        };
        let file = match std::fs::read_to_string(path) {
            Ok(t) => {
                let f: DbFile =
                    serde_json::from_str(&t).map_err(|e| err(format!("corrupt JSON: {e}")))?;
                if f.version != 1 {
                    return Err(err(format!("unsupported version {}", f.version)));
                }
                f
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => DbFile {
                version: 1,
                records: BTreeMap::new(),
            },
            Err(e) => return Err(err(e.to_string())),
        };
        Ok(TuningDb {
            path: path.to_path_buf(),
            file,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
    pub fn len(&self) -> usize {
        self.file.records.len()
    }
    pub fn is_empty(&self) -> bool {
        self.file.records.is_empty()
    }

    /// The record for `key` if it was tuned over the same candidate list.
    pub fn lookup(&self, key: &TuningKey, checksum: &str) -> Option<&TuningRecord> {
        self.file
            .records
            .get(&key.id())
            .filter(|r| r.candidates_checksum == checksum)
    }

    /// Stores a record and writes the file (atomically: [`tessera_core::atomic`]).
    pub fn insert(&mut self, rec: TuningRecord) -> Result<()> {
        self.file.records.insert(rec.key.id(), rec);
        self.save()
    }

    fn save(&self) -> Result<()> {
        let err = |msg: String| SpmvError::TuningDb {
            path: self.path.clone(),
            msg,
        };
        if let Some(d) = self.path.parent() {
            std::fs::create_dir_all(d).map_err(|e| err(e.to_string()))?;
        }
        let text = serde_json::to_string_pretty(&self.file).map_err(|e| err(e.to_string()))?;
        tessera_core::atomic::write_bytes(&self.path, text.as_bytes()).map_err(|e| err(e.reason()))
    }
}

/// Checksum of a candidate list (layouts and schedules, in order) and the scoring weight.
pub fn candidates_checksum(
    layouts: &[Layout],
    schedules: &[Schedule],
    search: Search,
    memory_weight: f64,
) -> String {
    let mut h = Sha256::new();
    for l in layouts {
        h.update(l.to_string().as_bytes());
        h.update(b";");
    }
    for s in schedules {
        h.update(s.to_string().as_bytes());
        h.update(b";");
    }
    h.update(format!("{search:?};{memory_weight}").as_bytes());
    h.finalize()
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// What [`tune`] found.
#[derive(Clone, Debug)]
pub struct TuneOutcome {
    /// Timed candidates, best score first (a database hit holds the stored best, re-timed).
    pub ranked: Vec<Candidate>,
    /// Whether the variant came from the database (no search).
    pub from_db: bool,
    /// Number of variants timed.
    pub evaluated: usize,
}

impl TuneOutcome {
    pub fn best(&self) -> Option<&Candidate> {
        self.ranked.first()
    }
    /// Best candidate of one layout.
    pub fn best_of(&self, layout: Layout) -> Option<&Candidate> {
        self.ranked.iter().find(|c| c.layout == layout)
    }
}

/// Jointly tunes layout and schedule. `memory_bytes(layout)` gives the matrix bytes of a
/// layout (for scoring and reports). On a database hit (same key and candidate list) only the
/// stored variant is timed.
pub fn tune(
    timer: &mut dyn VariantTimer,
    limits: &DeviceLimits,
    key: &TuningKey,
    matrix: &str,
    db: Option<&mut TuningDb>,
    memory_bytes: &dyn Fn(Layout) -> usize,
    params: &TuneParams,
) -> Result<TuneOutcome> {
    let all = limits.all_schedules();
    let check = candidates_checksum(&params.layouts, &all, params.search, params.memory_weight);
    let csr_bytes = memory_bytes(Layout::NATURAL).max(1) as f64;
    let score =
        |l: Layout, t: f64| t * (memory_bytes(l) as f64 / csr_bytes).powf(params.memory_weight);
    let mk = |l: Layout, s: Schedule, t: f64| Candidate {
        layout: l,
        schedule: s,
        time_ms: t,
        memory_bytes: memory_bytes(l),
        score: score(l, t),
    };
    if let (Some(db), false) = (db.as_deref(), params.force) {
        if let Some(rec) = db.lookup(key, &check) {
            let (l, s) = (rec.best.layout, rec.best.schedule);
            let t = timer.time(l, &[s])?;
            return Ok(TuneOutcome {
                ranked: vec![mk(l, s, t[0])],
                from_db: true,
                evaluated: 1,
            });
        }
    }
    let mut cands: Vec<Candidate> = Vec::new();
    let mut eval = |l: Layout, scheds: &[Schedule], cands: &mut Vec<Candidate>| -> Result<()> {
        let todo: Vec<Schedule> = scheds
            .iter()
            .copied()
            .filter(|s| !cands.iter().any(|c| c.layout == l && c.schedule == *s))
            .collect();
        if todo.is_empty() {
            return Ok(());
        }
        let t = timer.time(l, &todo)?;
        for (s, t) in todo.into_iter().zip(t) {
            cands.push(mk(l, s, t));
        }
        Ok(())
    };
    match params.search {
        Search::Full => {
            for &l in &params.layouts {
                eval(l, &all, &mut cands)?;
            }
        }
        Search::Fast => {
            let diag = limits.diagonal_schedules();
            for &l in &params.layouts {
                eval(l, &diag, &mut cands)?;
            }
            let best = cands
                .iter()
                .min_by(|a, b| a.score.total_cmp(&b.score))
                .cloned();
            if let Some(b) = best {
                let on_diag: Vec<Schedule> = all
                    .iter()
                    .copied()
                    .filter(|s| {
                        s.kind == b.schedule.kind
                            && s.threads_per_sm() == b.schedule.threads_per_sm()
                    })
                    .collect();
                eval(b.layout, &on_diag, &mut cands)?;
            }
        }
    }
    cands.sort_by(|a, b| {
        a.score
            .total_cmp(&b.score)
            .then(a.layout.cmp(&b.layout))
            .then(a.schedule.cmp(&b.schedule))
    });
    let evaluated = cands.len();
    if let (Some(db), Some(best)) = (db, cands.first()) {
        db.insert(TuningRecord {
            key: key.clone(),
            candidates_checksum: check,
            best: best.clone(),
            search: params.search,
            evaluated,
            matrix: matrix.to_string(),
            memory_weight: params.memory_weight,
        })?;
    }
    Ok(TuneOutcome {
        ranked: cands,
        from_db: false,
        evaluated,
    })
}
