//! NVRTC compilation with a persistent PTX cache (DESIGN.md: "NVRTC compile with a
//! persistent PTX cache (key: source hash + sm_XX + NVRTC version)").
//!
//! The cache lives in `dirs::cache_dir()/tessera/kernels` (`~/.cache/tessera/kernels` on
//! Linux), or in the folder named by `TESSERA_KERNEL_CACHE`. Each entry is one PTX file
//! named by [`cache_key`]. Entries are written to a temporary file and renamed, so
//! concurrent processes never read half a file. Setting `TESSERA_KERNEL_CACHE=off`
//! disables the disk cache.

use crate::error::{GpuError, GpuResult};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// Options of one NVRTC compilation. [`CompileOptions::to_args`] turns them into the exact,
/// deterministic NVRTC argument list that is hashed into the cache key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompileOptions {
    /// Program name shown in compile errors (for example `scan.cu`).
    pub name: String,
    /// Target compute capability as `major * 10 + minor` (90 for sm_90); `None` = the device's.
    pub arch: Option<u32>,
    /// C++ standard (`c++17`).
    pub std: String,
    /// `-default-device`: functions without execution-space annotation are `__device__`.
    pub default_device: bool,
    /// Add the CCCL (CUB/Thrust/libcu++) headers and the CUDA include folder when present.
    pub cccl: bool,
    /// Extra include folders.
    pub include_paths: Vec<String>,
    /// `-D NAME=VALUE` macros, in order.
    pub defines: Vec<(String, String)>,
    /// `--maxrregcount`.
    pub max_registers: Option<u32>,
    /// `--use_fast_math`.
    pub fast_math: bool,
    /// `-lineinfo` (for profilers).
    pub line_info: bool,
    /// Any further NVRTC options, passed through as given.
    pub extra: Vec<String>,
}

impl Default for CompileOptions {
    fn default() -> Self {
        CompileOptions {
            name: "kernel.cu".into(),
            arch: None,
            std: "c++17".into(),
            default_device: false,
            cccl: false,
            include_paths: Vec::new(),
            defines: Vec::new(),
            max_registers: None,
            fast_math: false,
            line_info: false,
            extra: Vec::new(),
        }
    }
}

/// Folders holding the CCCL headers and the CUDA headers, where present on this machine
/// (`CUDA_HOME`/`CUDA_PATH` first, then `/usr/local/cuda`).
pub fn cccl_include_paths() -> Vec<String> {
    let mut roots: Vec<PathBuf> = Vec::new();
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Ok(v) = std::env::var(var) {
            if !v.is_empty() {
                roots.push(PathBuf::from(v));
            }
        }
    }
    roots.push(PathBuf::from("/usr/local/cuda"));
    let mut out = Vec::new();
    for r in roots {
        let cccl = r.join("include/cccl");
        let inc = r.join("include");
        if cccl.is_dir() {
            out.push(cccl.display().to_string());
        }
        if inc.is_dir() {
            out.push(inc.display().to_string());
        }
        if !out.is_empty() {
            break;
        }
    }
    out
}

impl CompileOptions {
    /// Options named `name` with everything else default.
    pub fn named(name: impl Into<String>) -> Self {
        CompileOptions {
            name: name.into(),
            ..Default::default()
        }
    }

    /// The NVRTC arguments for a device of compute capability `sm` (for example 90).
    /// PTX is generated for the virtual architecture `compute_XX` of that device; the
    /// driver turns it into machine code for exactly that device when the module loads.
    pub fn to_args(&self, sm: u32) -> Vec<String> {
        let sm = self.arch.unwrap_or(sm);
        let mut a = vec![
            format!("--gpu-architecture=compute_{sm}"),
            format!("--std={}", self.std),
        ];
        if self.default_device {
            a.push("-default-device".into());
        }
        if self.cccl {
            for p in cccl_include_paths() {
                a.push(format!("--include-path={p}"));
            }
        }
        for p in &self.include_paths {
            a.push(format!("--include-path={p}"));
        }
        for (k, v) in &self.defines {
            if v.is_empty() {
                a.push(format!("-D{k}"));
            } else {
                a.push(format!("-D{k}={v}"));
            }
        }
        if let Some(r) = self.max_registers {
            a.push(format!("--maxrregcount={r}"));
        }
        if self.fast_math {
            a.push("--use_fast_math".into());
        }
        if self.line_info {
            a.push("-lineinfo".into());
        }
        a.extend(self.extra.iter().cloned());
        a
    }
}

/// Cache key of a compiled kernel: `sha256(source, 0, each option, 0)` in hex (first 32
/// digits), then `-sm_XX` and `-nvrtcMAJOR.MINOR`, for example
/// `3f...c1-sm_90-nvrtc13.0`. Equal sources and options give equal keys on every machine.
pub fn cache_key(source: &str, options: &[String], sm: u32, nvrtc_version: (i32, i32)) -> String {
    let mut h = Sha256::new();
    h.update(source.as_bytes());
    h.update([0u8]);
    for o in options {
        h.update(o.as_bytes());
        h.update([0u8]);
    }
    let d = h.finalize();
    let mut hex = String::with_capacity(32);
    for b in &d[..16] {
        hex.push_str(&format!("{b:02x}"));
    }
    format!("{hex}-sm_{sm}-nvrtc{}.{}", nvrtc_version.0, nvrtc_version.1)
}

/// Cache key of PTX text produced elsewhere (for example by the query compiler): the PTX is
/// the "source" and there are no options.
pub fn ptx_cache_key(ptx: &str, sm: u32, nvrtc_version: (i32, i32)) -> String {
    cache_key(ptx, &["<ptx>".to_string()], sm, nvrtc_version)
}

/// The kernel cache folder: `TESSERA_KERNEL_CACHE` if set (`off` disables caching), else
/// `dirs::cache_dir()/tessera/kernels`; `None` when disabled or no cache folder exists.
pub fn cache_dir() -> Option<PathBuf> {
    match std::env::var_os("TESSERA_KERNEL_CACHE") {
        Some(v) if v == "off" || v.is_empty() => None,
        Some(v) => Some(PathBuf::from(v)),
        None => dirs::cache_dir().map(|d| d.join("tessera").join("kernels")),
    }
}

/// Read a cached PTX entry.
pub fn cache_read(dir: &Path, key: &str) -> Option<String> {
    std::fs::read_to_string(dir.join(format!("{key}.ptx")))
        .ok()
        .filter(|s| s.contains(".version"))
}

/// Write a PTX entry (atomically: [`tessera_core::atomic`]).
pub fn cache_write(dir: &Path, key: &str, ptx: &str) -> GpuResult<()> {
    let err = |p: &Path, e: std::io::Error| GpuError::Cache {
        path: p.to_path_buf(),
        msg: e.to_string(),
    };
    std::fs::create_dir_all(dir).map_err(|e| err(dir, e))?;
    let fin = dir.join(format!("{key}.ptx"));
    tessera_core::atomic::write_bytes(&fin, ptx.as_bytes()).map_err(|e| GpuError::Cache {
        path: fin.clone(),
        msg: e.reason(),
    })
}

/// Compile CUDA C++ to PTX with NVRTC (no caching; see [`crate::Gpu::compile`]).
pub fn compile_to_ptx(source: &str, name: &str, args: &[String]) -> GpuResult<String> {
    if source.contains('\0') {
        return Err(GpuError::InvalidArgument(format!(
            "kernel source `{name}` contains a NUL byte"
        )));
    }
    crate::probe::probe_nvrtc()?;
    crate::error::guard("NVRTC compile", || {
        let opts = cudarc::nvrtc::CompileOptions {
            options: args.to_vec(),
            name: Some(name.replace('\0', "")),
            ..Default::default()
        };
        match cudarc::nvrtc::compile_ptx_with_opts(source, opts) {
            Ok(ptx) => Ok(ptx.to_src()),
            Err(cudarc::nvrtc::CompileError::CompileError {
                nvrtc,
                options,
                log,
            }) => Err(GpuError::Compile {
                name: name.to_string(),
                options,
                log: format!("{}\n({nvrtc:?})", log.to_string_lossy()),
            }),
            Err(e) => Err(GpuError::Compile {
                name: name.to_string(),
                options: args.to_vec(),
                log: format!("{e:?}"),
            }),
        }
    })
}

/// NVRTC version `(major, minor)`.
pub fn nvrtc_version() -> GpuResult<(i32, i32)> {
    crate::probe::probe_nvrtc()?;
    crate::error::guard("nvrtcVersion", || {
        let (mut a, mut b) = (0i32, 0i32);
        // SAFETY: nvrtcVersion writes two ints through valid pointers to locals.
        let r = unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut a, &mut b) };
        r.result()
            .map_err(|e| GpuError::NoNvrtc(format!("nvrtcVersion failed: {e:?}")))?;
        Ok((a, b))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_key_is_stable_and_sensitive() {
        let src = "extern \"C\" __global__ void k() {}";
        let opts = vec![
            "--gpu-architecture=compute_90".to_string(),
            "--std=c++17".to_string(),
        ];
        let k = cache_key(src, &opts, 90, (13, 0));
        // golden value: sha256 of the bytes `src \0 opt0 \0 opt1 \0` (checked with sha256sum)
        assert_eq!(k, format!("{}-sm_90-nvrtc13.0", GOLDEN));
        assert_eq!(k, cache_key(src, &opts, 90, (13, 0)));
        assert_ne!(
            k,
            cache_key("extern \"C\" __global__ void k2() {}", &opts, 90, (13, 0))
        );
        assert_ne!(k, cache_key(src, &opts[..1], 90, (13, 0)));
        assert_ne!(k, cache_key(src, &opts, 89, (13, 0)));
        assert_ne!(k, cache_key(src, &opts, 90, (12, 8)));
        // option boundaries matter: ["ab","c"] != ["a","bc"]
        assert_ne!(
            cache_key(src, &["ab".into(), "c".into()], 90, (13, 0)),
            cache_key(src, &["a".into(), "bc".into()], 90, (13, 0))
        );
        assert_ne!(ptx_cache_key(src, 90, (13, 0)), k);
    }

    const GOLDEN: &str = include_str!("../tests/cache_key_golden.txt");

    #[test]
    fn options_are_deterministic() {
        let mut o = CompileOptions::named("x.cu");
        o.defines.push(("BLOCK".into(), "256".into()));
        o.max_registers = Some(64);
        o.default_device = true;
        assert_eq!(
            o.to_args(90),
            vec![
                "--gpu-architecture=compute_90",
                "--std=c++17",
                "-default-device",
                "-DBLOCK=256",
                "--maxrregcount=64"
            ]
        );
        o.arch = Some(80);
        assert_eq!(o.to_args(90)[0], "--gpu-architecture=compute_80");
    }

    #[test]
    fn cache_roundtrip_in_temp_dir() {
        let d = std::env::temp_dir().join(format!("tessera-cache-test-{}", std::process::id()));
        let ptx = "//\n.version 8.0\n.target sm_90\n";
        cache_write(&d, "abc-sm_90-nvrtc13.0", ptx).unwrap();
        assert_eq!(cache_read(&d, "abc-sm_90-nvrtc13.0").as_deref(), Some(ptx));
        assert_eq!(cache_read(&d, "missing"), None);
        std::fs::remove_dir_all(&d).ok();
    }
}
