//! Library discovery before the first cudarc call.
//!
//! cudarc with `dynamic-loading` panics on the first call when `libcuda` or `libnvrtc` is
//! missing. Tessera therefore checks for both libraries first, with the same `dlopen`
//! candidates cudarc uses (`libcuda.so.1`, `libnvrtc.so.13`, ...), and when a library is
//! not on the loader path it looks in the usual install folders (`LD_LIBRARY_PATH`,
//! `/usr/local/cuda*/lib64`, `/usr/lib/x86_64-linux-gnu`, ...). A library found there is
//! loaded once by full path and kept loaded, so cudarc's later lookup by soname finds it.
//! Every cudarc call is in addition wrapped in `catch_unwind` ([`crate::error`]).

use crate::error::GpuError;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Which library a probe is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CudaLibrary {
    /// The CUDA driver, `libcuda.so.1`.
    Driver,
    /// The run-time compiler, `libnvrtc.so.*`.
    Nvrtc,
}

impl CudaLibrary {
    fn stem(self) -> &'static str {
        match self {
            CudaLibrary::Driver => "libcuda.so",
            CudaLibrary::Nvrtc => "libnvrtc.so",
        }
    }
}

/// Folders searched when a library is not found on the loader path (deterministic order).
pub fn search_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    for var in ["LD_LIBRARY_PATH", "CUDA_PATH", "CUDA_HOME"] {
        if let Ok(v) = std::env::var(var) {
            for p in v.split(':').filter(|p| !p.is_empty()) {
                let p = PathBuf::from(p);
                if var == "LD_LIBRARY_PATH" {
                    dirs.push(p);
                } else {
                    dirs.push(p.join("lib64"));
                    dirs.push(p.join("lib"));
                }
            }
        }
    }
    for d in [
        "/usr/local/cuda/lib64",
        "/usr/local/cuda/targets/x86_64-linux/lib",
        "/usr/local/cuda/compat",
        "/usr/local/nvidia/lib64",
        "/usr/lib/x86_64-linux-gnu",
        "/usr/lib64",
        "/usr/lib/wsl/lib",
    ] {
        dirs.push(PathBuf::from(d));
    }
    // versioned installs: /usr/local/cuda-13.0/lib64 etc., newest name last -> sort descending
    if let Ok(rd) = std::fs::read_dir("/usr/local") {
        let mut v: Vec<PathBuf> = rd
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("cuda-"))
            })
            .map(|p| p.join("lib64"))
            .collect();
        v.sort();
        v.reverse();
        dirs.extend(v);
    }
    dirs
}

/// Files in `dir` that look like `lib` (for example `libnvrtc.so.13.0.48`), best first.
fn candidates_in(dir: &Path, lib: CudaLibrary) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let stem = lib.stem();
    let mut v: Vec<PathBuf> = rd
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n == stem || n.starts_with(&format!("{stem}.")))
        })
        .collect();
    v.sort();
    v.reverse();
    v
}

fn on_loader_path(lib: CudaLibrary) -> bool {
    // SAFETY: `is_culib_present` only calls `dlopen` on cudarc's candidate names and drops
    // the handles; loading the CUDA driver or NVRTC runs no user-visible initialisers.
    match lib {
        CudaLibrary::Driver => unsafe { cudarc::driver::sys::is_culib_present() },
        CudaLibrary::Nvrtc => unsafe { cudarc::nvrtc::sys::is_culib_present() },
    }
}

fn probe_uncached(lib: CudaLibrary) -> Result<String, String> {
    let present = std::panic::catch_unwind(|| on_loader_path(lib)).unwrap_or(false);
    if present {
        return Ok(format!("{} (loader path)", lib.stem()));
    }
    let mut tried = Vec::new();
    for dir in search_dirs() {
        for cand in candidates_in(&dir, lib) {
            // SAFETY: loading a shared library by full path runs its initialisers; these are
            // NVIDIA's libcuda/libnvrtc found in standard install folders. The handle is
            // leaked on purpose so the library stays loaded for cudarc's soname lookup.
            match unsafe { libloading::Library::new(&cand) } {
                Ok(l) => {
                    std::mem::forget(l);
                    let now = std::panic::catch_unwind(|| on_loader_path(lib)).unwrap_or(false);
                    if now {
                        return Ok(cand.display().to_string());
                    }
                    tried.push(format!(
                        "{} (loaded, but its soname does not match what cudarc asks for)",
                        cand.display()
                    ));
                }
                Err(e) => tried.push(format!("{}: {e}", cand.display())),
            }
        }
    }
    if tried.is_empty() {
        Err(format!(
            "{}* not found on the loader path or in {}",
            lib.stem(),
            "LD_LIBRARY_PATH, /usr/local/cuda*/lib64, /usr/lib/x86_64-linux-gnu"
        ))
    } else {
        Err(format!(
            "{}* could not be loaded: {}",
            lib.stem(),
            tried.join("; ")
        ))
    }
}

/// Check (once per process) that the CUDA driver library can be loaded.
pub fn probe_driver() -> Result<String, GpuError> {
    static R: OnceLock<Result<String, String>> = OnceLock::new();
    R.get_or_init(|| probe_uncached(CudaLibrary::Driver))
        .clone()
        .map_err(GpuError::NoDriver)
}

/// Check (once per process) that NVRTC can be loaded.
pub fn probe_nvrtc() -> Result<String, GpuError> {
    static R: OnceLock<Result<String, String>> = OnceLock::new();
    R.get_or_init(|| probe_uncached(CudaLibrary::Nvrtc))
        .clone()
        .map_err(GpuError::NoNvrtc)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probes_never_panic() {
        // On a machine without CUDA these are errors with a reason; with CUDA they are Ok.
        match probe_driver() {
            Ok(w) => assert!(!w.is_empty()),
            Err(e) => assert!(e.to_string().starts_with("no CUDA driver"), "{e}"),
        }
        match probe_nvrtc() {
            Ok(w) => assert!(!w.is_empty()),
            Err(e) => assert!(e.to_string().contains("NVRTC"), "{e}"),
        }
    }

    #[test]
    fn search_dirs_include_standard_cuda_folder() {
        assert!(search_dirs()
            .iter()
            .any(|d| d == Path::new("/usr/local/cuda/lib64")));
    }
}
