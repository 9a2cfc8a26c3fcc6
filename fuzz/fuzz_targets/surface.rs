//! cargo-fuzz target: the polygon-surface readers (Wavefront OBJ, PLY ASCII and binary of
//! both byte orders, OFF). The first byte picks the reader, the rest is the file. Any input
//! gives either a face table with in-range vertices and faces of >= 3 vertices, or one error
//! line naming the file; header counts never allocate more than the input can hold.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tessera_mesh::io::fuzz::check_surface;
use tessera_mesh::io::SurfaceFormat;

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let (fmt, label) = match pick % 3 {
        0 => (SurfaceFormat::Obj, "fuzz.obj"),
        1 => (SurfaceFormat::Ply, "fuzz.ply"),
        _ => (SurfaceFormat::Off, "fuzz.off"),
    };
    check_surface(fmt, label, rest);
});
