//! cargo-fuzz target for the query parser and front end (issue 8). Any input must give
//! either a compiled query (which then evaluates without panicking) or an error whose span
//! lies inside the input.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tessera_query::{Backend, Par, Query};

fuzz_target!(|data: &[u8]| {
    let Ok(src) = std::str::from_utf8(data) else { return };
    match Query::compile(src, &["VelocityX", "VelocityY", "Pressure"]) {
        Ok(q) => {
            let x = [0.5f32, -1.0, f32::NAN, 0.0, 3.0];
            let mut o = [0.0f32; 5];
            q.eval_cpu_with(Backend::Interp, Par::Seq, &[&x, &x, &x], &mut o).unwrap();
        }
        Err(e) => {
            let s = e.span().expect("expression errors carry a span");
            assert!(s.start <= s.end && s.end <= src.len());
        }
    }
});
