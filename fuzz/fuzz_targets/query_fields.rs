//! cargo-fuzz target: the query field-file readers (raw little-endian values and `.npy`).
//! Any input decodes to a whole number of values or gives one bounded error line.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;
use tessera_query::fields::decode_field;
use tessera_query::npy::parse_npy;

fuzz_target!(|data: &[u8]| {
    let p = Path::new("f");
    for r in [
        decode_field::<f32>(p, data).map(|v| v.len() * 4),
        decode_field::<f64>(p, data).map(|v| v.len() * 8),
    ] {
        match r {
            Ok(n) => assert_eq!(n, data.len()),
            Err(e) => assert!(!e.to_string().contains('\n')),
        }
    }
    match parse_npy(p, data) {
        Ok(a) => assert_eq!(a.values.len(), a.shape.iter().product::<usize>()),
        Err(e) => {
            let m = e.to_string();
            assert!(!m.contains('\n') && m.len() < 600, "{m}");
        }
    }
});
