//! The autotuner with a synthetic timer (no GPU): the full search visits the whole Cartesian
//! product, the fast (diagonal) search far fewer variants, memory weighting changes the
//! ranking, and the tuning database survives a restart and is used (no search on a hit).

use tessera_spmv::layout::Outer;
use tessera_spmv::matrices::MatrixSource;
use tessera_spmv::matrices::MatrixStats;
use tessera_spmv::tuning::{tune, Search, TuneParams, TuningDb, TuningKey, VariantTimer};
use tessera_spmv::{Aos, DeviceLimits, Layout, Schedule, ScheduleKind};

/// A deterministic cost model: best at 1024 threads per SM, ELL-SoA-AoS fastest, dynamic a bit
/// slower; counts how many variants were timed.
struct Model {
    timed: usize,
}

impl VariantTimer for Model {
    fn time(&mut self, l: Layout, s: &[Schedule]) -> tessera_spmv::Result<Vec<f64>> {
        self.timed += s.len();
        Ok(s.iter()
            .map(|s| {
                let lay = match (l.outer, l.inner, l.vector) {
                    (Outer::Ell, Aos::Soa, Aos::Aos) => 1.0,
                    (Outer::Csr, Aos::Aos, Aos::Aos) => 1.6,
                    _ => 1.3,
                };
                let d = (s.threads_per_sm() as f64 / 1024.0).log2().abs();
                let kind = if s.kind == ScheduleKind::Dynamic {
                    1.05
                } else {
                    1.0
                };
                lay * (1.0 + 0.2 * d) * kind * (1.0 + 0.001 * (s.n_t as f64 / 32.0))
            })
            .collect())
    }
}

fn key(class: &str) -> TuningKey {
    TuningKey {
        gpu: "Synthetic GPU".into(),
        sm: "sm_90".into(),
        cuda: "13.0".into(),
        entry: "block3".into(),
        precision: "f32".into(),
        class: class.into(),
    }
}

#[test]
fn full_and_fast_search_find_the_optimum() {
    let lim = DeviceLimits::h100();
    let mem = |l: Layout| if l.outer == Outer::Ell { 300 } else { 100 };
    let mut m = Model { timed: 0 };
    let full = tune(
        &mut m,
        &lim,
        &key("c"),
        "m",
        None,
        &mem,
        &TuneParams {
            search: Search::Full,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(m.timed, 16 * lim.all_schedules().len());
    let b = full.best().unwrap();
    assert_eq!(b.layout.to_string(), "ell-soa-aos");
    assert_eq!(
        (b.schedule.kind, b.schedule.threads_per_sm(), b.schedule.n_t),
        (ScheduleKind::Static, 1024, 32)
    );
    let mut m2 = Model { timed: 0 };
    let fast = tune(
        &mut m2,
        &lim,
        &key("c"),
        "m",
        None,
        &mem,
        &TuneParams::default(),
    )
    .unwrap();
    assert!(
        m2.timed * 3 < m.timed,
        "fast search timed {} of {}",
        m2.timed,
        m.timed
    );
    assert_eq!(fast.best().unwrap().layout, b.layout);
    assert_eq!(fast.best().unwrap().schedule, b.schedule);
    // a memory weight of 1 makes the 3x larger ELL layout lose
    let w = tune(
        &mut m2,
        &lim,
        &key("c"),
        "m",
        None,
        &mem,
        &TuneParams {
            memory_weight: 1.0,
            ..Default::default()
        },
    )
    .unwrap();
    assert_ne!(w.best().unwrap().layout.outer, Outer::Ell);
}

#[test]
fn tuning_db_survives_restart_and_is_used() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sub").join("tuning.json");
    let lim = DeviceLimits::h100();
    let mem = |_l: Layout| 100usize;
    // the class signature of two different matrices of one class is equal
    let spec = tessera_spmv::EntrySpec::builtin("block3").unwrap();
    let (a, _) = MatrixSource::TetGrid(12, 12, 12).load(&spec).unwrap();
    let (b, _) = MatrixSource::TetGrid(12, 13, 13).load(&spec).unwrap();
    let (ca, cb) = (
        MatrixStats::of(&a).class_signature(),
        MatrixStats::of(&b).class_signature(),
    );
    assert_eq!(ca, cb);
    let first_best;
    {
        let mut db = TuningDb::open(&path).unwrap();
        assert!(db.is_empty());
        let mut m = Model { timed: 0 };
        let out = tune(
            &mut m,
            &lim,
            &key(&ca),
            "a",
            Some(&mut db),
            &mem,
            &TuneParams::default(),
        )
        .unwrap();
        assert!(!out.from_db && m.timed > 16);
        first_best = out.best().unwrap().clone();
    } // "restart": the database object is gone, only the file remains
    assert!(path.exists());
    let mut db = TuningDb::open(&path).unwrap();
    assert_eq!(db.len(), 1);
    let mut m = Model { timed: 0 };
    let out = tune(
        &mut m,
        &lim,
        &key(&cb),
        "b",
        Some(&mut db),
        &mem,
        &TuneParams::default(),
    )
    .unwrap();
    assert!(out.from_db, "the stored record was not used");
    assert_eq!(m.timed, 1, "a database hit times only the stored variant");
    assert_eq!(out.best().unwrap().layout, first_best.layout);
    assert_eq!(out.best().unwrap().schedule, first_best.schedule);
    // another GPU, or another candidate list (search mode), misses
    let mut other = key(&cb);
    other.gpu = "Other GPU".into();
    let mut m = Model { timed: 0 };
    assert!(
        !tune(
            &mut m,
            &lim,
            &other,
            "b",
            Some(&mut db),
            &mem,
            &TuneParams::default()
        )
        .unwrap()
        .from_db
    );
    let mut m = Model { timed: 0 };
    let full = TuneParams {
        search: Search::Full,
        layouts: vec![Layout::NATURAL],
        ..Default::default()
    };
    assert!(
        !tune(&mut m, &lim, &key(&cb), "b", Some(&mut db), &mem, &full)
            .unwrap()
            .from_db
    );
    assert_eq!(TuningDb::open(&path).unwrap().len(), 2);
    // a corrupt file is a clear error
    std::fs::write(&path, "{not json").unwrap();
    let e = TuningDb::open(&path).err().unwrap().to_string();
    assert!(e.contains("tuning.json") && e.contains("corrupt"), "{e}");
}
