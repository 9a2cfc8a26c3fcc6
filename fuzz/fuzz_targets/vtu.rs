//! cargo-fuzz target: the VTK XML (`.vtu`) reader: every encoding (ASCII, base64, appended
//! raw, zlib blocks), polyhedra and higher-order cells. Properties as for `msh`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    tessera_mesh::io::fuzz::check_reader(tessera_mesh::io::Format::Vtu, "fuzz.vtu", data);
});
