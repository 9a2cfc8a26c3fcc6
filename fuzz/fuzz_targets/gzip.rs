//! cargo-fuzz target: the bounded gzip layer. Any input inflates within the limits or
//! gives one error line; the output never exceeds the absolute limit.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tessera_core::input::{gunzip, GzipLimits};

fuzz_target!(|data: &[u8]| {
    let lim = GzipLimits {
        max_ratio: 250,
        max_bytes: 64 << 20,
    };
    match gunzip("fuzz.gz".as_ref(), data, &lim) {
        Ok(out) => assert!(out.len() as u64 <= lim.max_bytes),
        Err(e) => {
            let m = e.to_string();
            assert!(m.starts_with("fuzz.gz: ") && !m.contains('\n'), "{m}");
        }
    }
});
