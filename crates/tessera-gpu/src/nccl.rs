//! NCCL: GPU-to-GPU communication between the devices of one process, for the
//! domain-decomposed solvers (dissertation §7.1.2: per-domain assembly "in distributed or
//! multi-GPU simulations using domain decomposition").
//!
//! - [`NcclLibrary::load`]: finds and loads `libnccl.so.2` at run time, like the driver
//!   ([`crate::probe`]); a missing library is [`GpuError::NoNccl`], never a panic or an abort.
//! - [`NcclComm::new`]: one communicator over several devices of this process
//!   (`ncclCommInitAll`), one rank per [`Gpu`], each rank working on that `Gpu`'s stream.
//! - [`NcclComm::exchange`]: grouped point-to-point sends and receives, the halo exchange of a
//!   partitioned operator; [`NcclComm::all_reduce_sum`]: the global sums of its dot products.
//!
//! **Why not cudarc's `Comm` directly.** cudarc 0.19 (feature `nccl`, which this module uses for
//! the ABI types) looks the library up only under its own candidate names (`libnccl.so`,
//! `libnccl.so.13`, `.12`, …, `.1`) and panics when none loads. NVIDIA ships NCCL as
//! `libnccl.so.2` (the `nvidia-nccl-cu13` wheel, Debian's `libnccl2`); `libnccl.so` exists only
//! with the development package. So Tessera loads the library itself (by soname on the loader
//! path, then by full path from `LD_LIBRARY_PATH`, the CUDA folders and Python's
//! `site-packages/nvidia/nccl/lib`) and calls the handful of entry points it needs through that
//! handle.
//!
//! **NVLink multicast stays off.** Before the library is loaded, `NCCL_NVLS_ENABLE` is set to
//! `0` in this process unless the user has set it: NVLS (NVLink SHARP multicast) is not needed
//! for halo exchanges and all-reduces of a few doubles, and on shared machines a program that
//! uses it can take the host's GPUs out of service.

use crate::error::{guard, GpuError, GpuResult};
use crate::runtime::{DeviceBuffer, Gpu};
use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut};
use cudarc::nccl::sys::{ncclComm_t, ncclDataType_t, ncclRedOp_t};
use std::ffi::{c_char, c_int, c_void, CStr};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

/// The file name NCCL is installed under (its soname).
pub const NCCL_SONAME: &str = "libnccl.so.2";

type InitAll = unsafe extern "C" fn(*mut ncclComm_t, c_int, *const c_int) -> c_int;
type Destroy = unsafe extern "C" fn(ncclComm_t) -> c_int;
type GetVersion = unsafe extern "C" fn(*mut c_int) -> c_int;
type ErrorString = unsafe extern "C" fn(c_int) -> *const c_char;
type Group = unsafe extern "C" fn() -> c_int;
type Send = unsafe extern "C" fn(
    *const c_void,
    usize,
    ncclDataType_t,
    c_int,
    ncclComm_t,
    *mut c_void,
) -> c_int;
type Recv = unsafe extern "C" fn(
    *mut c_void,
    usize,
    ncclDataType_t,
    c_int,
    ncclComm_t,
    *mut c_void,
) -> c_int;
type AllReduce = unsafe extern "C" fn(
    *const c_void,
    *mut c_void,
    usize,
    ncclDataType_t,
    ncclRedOp_t,
    ncclComm_t,
    *mut c_void,
) -> c_int;

/// The loaded NCCL library: where it was found, its version and the entry points Tessera uses.
pub struct NcclLibrary {
    path: String,
    version: i32,
    init_all: InitAll,
    destroy: Destroy,
    error_string: ErrorString,
    group_start: Group,
    group_end: Group,
    send: Send,
    recv: Recv,
    all_reduce: AllReduce,
    // kept loaded for the life of the process (the function pointers above point into it)
    _lib: libloading::Library,
}

impl std::fmt::Debug for NcclLibrary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NcclLibrary({}, {})", self.path, self.version_string())
    }
}

/// Folders searched for `libnccl.so.2` after the loader path, in order: `LD_LIBRARY_PATH`,
/// `NCCL_HOME`/`CUDA_HOME` library folders, the standard CUDA and system folders, then the
/// `nvidia/nccl/lib` folder of Python installations (`site-packages` and `dist-packages`
/// under `VIRTUAL_ENV`, `CONDA_PREFIX`, `/usr/local`, `/usr`, `/opt/conda` and `~/.local`).
pub fn nccl_search_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Ok(v) = std::env::var("LD_LIBRARY_PATH") {
        dirs.extend(v.split(':').filter(|p| !p.is_empty()).map(PathBuf::from));
    }
    for var in ["NCCL_HOME", "CUDA_HOME", "CUDA_PATH"] {
        if let Ok(v) = std::env::var(var) {
            dirs.push(Path::new(&v).join("lib"));
            dirs.push(Path::new(&v).join("lib64"));
        }
    }
    for d in [
        "/usr/local/cuda/lib64",
        "/usr/local/cuda/targets/x86_64-linux/lib",
        "/usr/lib/x86_64-linux-gnu",
        "/usr/lib64",
        "/usr/local/lib",
    ] {
        dirs.push(PathBuf::from(d));
    }
    let mut prefixes: Vec<PathBuf> = Vec::new();
    for var in ["VIRTUAL_ENV", "CONDA_PREFIX"] {
        if let Ok(v) = std::env::var(var) {
            prefixes.push(PathBuf::from(v));
        }
    }
    prefixes.extend(["/usr/local", "/usr", "/opt/conda"].map(PathBuf::from));
    if let Some(h) = dirs::home_dir() {
        prefixes.push(h.join(".local"));
    }
    for p in prefixes {
        let lib = p.join("lib");
        let Ok(rd) = std::fs::read_dir(&lib) else {
            continue;
        };
        let mut pys: Vec<PathBuf> = rd
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("python3"))
            })
            .collect();
        pys.sort();
        pys.reverse();
        for py in pys {
            for sp in ["site-packages", "dist-packages"] {
                dirs.push(py.join(sp).join("nvidia/nccl/lib"));
            }
        }
    }
    dirs
}

/// The `nvidia/nccl/lib` folder of the `python3` on `PATH`, if it has the `nvidia-nccl-cu*`
/// package (asked only when no folder of [`nccl_search_dirs`] holds the library).
fn python_nccl_dir() -> Option<PathBuf> {
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            "import nvidia.nccl as m, os; print(os.path.join(list(m.__path__)[0], 'lib'))",
        ])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let s = String::from_utf8(out.stdout).ok()?;
    let p = PathBuf::from(s.trim());
    p.is_dir().then_some(p)
}

/// The candidate files for NCCL in `dirs`, in order (`libnccl.so.2`, then `libnccl.so`).
pub fn nccl_candidates(dirs: &[PathBuf]) -> Vec<PathBuf> {
    let mut v = Vec::new();
    for d in dirs {
        for name in [NCCL_SONAME, "libnccl.so"] {
            let p = d.join(name);
            if p.is_file() && !v.contains(&p) {
                v.push(p);
            }
        }
    }
    v
}

/// The message of a missing library: what was looked for and where.
pub fn not_found_message(extra: &str) -> String {
    format!(
        "NCCL library not found: {NCCL_SONAME}; searched the loader path, LD_LIBRARY_PATH, \
         NCCL_HOME, CUDA_HOME, /usr/local/cuda/lib64, /usr/lib/x86_64-linux-gnu and Python's \
         site-packages/nvidia/nccl/lib{extra}. Install NCCL (pip install nvidia-nccl-cu13, or \
         the libnccl2 package) or add its folder to LD_LIBRARY_PATH"
    )
}

/// Set `NCCL_NVLS_ENABLE=0` unless the user set it (see the module docs).
fn keep_nvls_off() {
    if std::env::var_os("NCCL_NVLS_ENABLE").is_none() {
        // Called once, under the OnceLock of `NcclLibrary::load`, before NCCL is loaded
        // (NCCL reads it at initialisation).
        std::env::set_var("NCCL_NVLS_ENABLE", "0");
    }
}

fn open(path: &str) -> Result<libloading::Library, String> {
    // SAFETY: loading NCCL runs its initialisers (it registers nothing with this process but
    // its own state); the library is NVIDIA's, found under its soname or a standard folder.
    unsafe { libloading::Library::new(path) }.map_err(|e| format!("{path}: {e}"))
}

fn bind(lib: libloading::Library, path: String) -> Result<NcclLibrary, String> {
    // SAFETY: each symbol is declared with the signature of nccl.h (NCCL 2.x, unchanged since
    // 2.7): results and enums are 32-bit C ints, counts size_t, streams and communicators
    // pointers. The library stays loaded in the returned struct, so the pointers stay valid.
    unsafe {
        macro_rules! sym {
            ($name:literal) => {
                *lib.get(concat!($name, "\0").as_bytes())
                    .map_err(|e| format!("{path} has no {}: {e}", $name))?
            };
        }
        let get_version: GetVersion = sym!("ncclGetVersion");
        let mut version: c_int = 0;
        let rc = get_version(&mut version);
        if rc != 0 {
            return Err(format!("{path}: ncclGetVersion returned {rc}"));
        }
        Ok(NcclLibrary {
            init_all: sym!("ncclCommInitAll"),
            destroy: sym!("ncclCommDestroy"),
            error_string: sym!("ncclGetErrorString"),
            group_start: sym!("ncclGroupStart"),
            group_end: sym!("ncclGroupEnd"),
            send: sym!("ncclSend"),
            recv: sym!("ncclRecv"),
            all_reduce: sym!("ncclAllReduce"),
            version,
            path,
            _lib: lib,
        })
    }
}

/// Load NCCL from the loader path, then from the files of `dirs` (first that loads wins).
pub fn load_from(dirs: &[PathBuf]) -> Result<NcclLibrary, String> {
    let mut tried = Vec::new();
    for name in [NCCL_SONAME, "libnccl.so"] {
        match open(name) {
            Ok(l) => return bind(l, format!("{name} (loader path)")),
            Err(e) => tried.push(e),
        }
    }
    let cands = nccl_candidates(dirs);
    let mut failures = Vec::new();
    for c in &cands {
        let p = c.display().to_string();
        match open(&p).and_then(|l| bind(l, p.clone())) {
            Ok(n) => return Ok(n),
            Err(e) => failures.push(e),
        }
    }
    if failures.is_empty() {
        Err(not_found_message(""))
    } else {
        Err(format!(
            "NCCL library not found: {NCCL_SONAME} could not be loaded: {}",
            failures.join("; ")
        ))
    }
}

impl NcclLibrary {
    /// The process's NCCL, loaded once (see the module docs for where it is looked for).
    /// Never panics: a missing or broken library is [`GpuError::NoNccl`] with the reason.
    pub fn load() -> GpuResult<&'static NcclLibrary> {
        static LIB: OnceLock<Result<NcclLibrary, String>> = OnceLock::new();
        LIB.get_or_init(|| {
            keep_nvls_off();
            let mut dirs = nccl_search_dirs();
            if nccl_candidates(&dirs).is_empty() {
                dirs.extend(python_nccl_dir());
            }
            load_from(&dirs)
        })
        .as_ref()
        .map_err(|e| GpuError::NoNccl(e.clone()))
    }
    /// Where the library was loaded from.
    pub fn path(&self) -> &str {
        &self.path
    }
    /// NCCL's version code (`major * 10000 + minor * 100 + patch`, for example 22807).
    pub fn version(&self) -> i32 {
        self.version
    }
    /// The version as `2.28.7`.
    pub fn version_string(&self) -> String {
        let v = self.version;
        format!("{}.{}.{}", v / 10000, (v / 100) % 100, v % 100)
    }
    fn check(&self, op: &'static str, rc: c_int) -> GpuResult<()> {
        if rc == 0 {
            return Ok(());
        }
        // SAFETY: ncclGetErrorString returns a static NUL-terminated string for any code.
        let msg = unsafe {
            let p = (self.error_string)(rc);
            if p.is_null() {
                format!("error {rc}")
            } else {
                format!("{} (code {rc})", CStr::from_ptr(p).to_string_lossy())
            }
        };
        Err(GpuError::Nccl { op, msg })
    }
}

/// An error unless every device ordinal appears once: NCCL refuses a communicator with two
/// ranks on one device (several domains on one device exchange through device copies).
pub fn check_distinct_devices(ordinals: &[usize]) -> GpuResult<()> {
    for (i, a) in ordinals.iter().enumerate() {
        if ordinals[..i].contains(a) {
            return Err(GpuError::InvalidArgument(format!(
                "device cuda:{a} appears twice in an NCCL communicator; NCCL needs one rank per \
                 device (put several domains on one device instead)"
            )));
        }
    }
    if ordinals.is_empty() {
        return Err(GpuError::InvalidArgument(
            "an NCCL communicator needs at least one device".into(),
        ));
    }
    Ok(())
}

/// One NCCL communicator over several devices of this process (`ncclCommInitAll`): rank `r`
/// is the `r`-th [`Gpu`] given to [`NcclComm::new`] and works on that `Gpu`'s stream, so
/// communication is ordered with the kernels launched there.
pub struct NcclComm {
    lib: &'static NcclLibrary,
    comms: Vec<ncclComm_t>,
    streams: Vec<Arc<CudaStream>>,
    ordinals: Vec<usize>,
}

impl std::fmt::Debug for NcclComm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NcclComm")
            .field("ranks", &self.comms.len())
            .field("devices", &self.ordinals)
            .finish()
    }
}

impl NcclComm {
    /// A communicator with one rank per device in `gpus` (distinct devices; a single device
    /// gives a communicator of one rank). Loads NCCL first ([`NcclLibrary::load`]).
    pub fn new(gpus: &[&Gpu]) -> GpuResult<NcclComm> {
        let ordinals: Vec<usize> = gpus.iter().map(|g| g.ordinal()).collect();
        check_distinct_devices(&ordinals)?;
        let lib = NcclLibrary::load()?;
        // NCCL allocates its buffers itself and cannot take back what the `Gpu`s' caches
        // of freed buffers hold (crate::buffer_cache): give it back to the driver first
        for g in gpus {
            g.trim_buffer_cache();
        }
        let devs: Vec<c_int> = ordinals.iter().map(|&o| o as c_int).collect();
        let mut comms: Vec<ncclComm_t> = vec![std::ptr::null_mut(); devs.len()];
        guard("ncclCommInitAll", || {
            // SAFETY: `comms` has room for one handle per device of `devs`; NCCL fills it.
            let rc =
                unsafe { (lib.init_all)(comms.as_mut_ptr(), devs.len() as c_int, devs.as_ptr()) };
            lib.check("ncclCommInitAll", rc)
        })?;
        Ok(NcclComm {
            lib,
            comms,
            streams: gpus.iter().map(|g| g.stream().clone()).collect(),
            ordinals,
        })
    }
    /// Number of ranks.
    pub fn ranks(&self) -> usize {
        self.comms.len()
    }
    /// Device ordinal of each rank.
    pub fn devices(&self) -> &[usize] {
        &self.ordinals
    }
    /// The loaded library.
    pub fn library(&self) -> &'static NcclLibrary {
        self.lib
    }

    /// Point-to-point transfers in one NCCL group (`ncclGroupStart`, one `ncclSend` and one
    /// `ncclRecv` per transfer, `ncclGroupEnd`): `transfers[i]` moves
    /// `sends[from_buf].1[from]` into `recvs[to_buf].1[to_at ..]`. Each buffer is given with the
    /// rank whose device holds it, and the operations run on the ranks' streams. Sends and
    /// receives are posted in the order of `transfers`, so between any two ranks they match in
    /// that order. A transfer within one rank is an NCCL self send/receive.
    pub fn exchange(
        &self,
        sends: &[(usize, &DeviceBuffer<f64>)],
        recvs: &mut [(usize, &mut DeviceBuffer<f64>)],
        transfers: &[Transfer],
    ) -> GpuResult<()> {
        let n = self.ranks();
        let bad = |m: String| Err(GpuError::InvalidArgument(m));
        for (r, _) in sends.iter() {
            if *r >= n {
                return bad(format!("send buffer on rank {r} of {n}"));
            }
        }
        for (r, _) in recvs.iter() {
            if *r >= n {
                return bad(format!("receive buffer on rank {r} of {n}"));
            }
        }
        for t in transfers {
            let (Some(s), Some(r)) = (sends.get(t.from_buf), recvs.get(t.to_buf)) else {
                return bad(format!("transfer {t:?} names a buffer that is not given"));
            };
            if t.from.start > t.from.end
                || t.from.end > s.1.len()
                || t.to_at + t.from.len() > r.1.len()
            {
                return bad(format!(
                    "transfer {t:?} outside its buffers ({} and {} elements)",
                    s.1.len(),
                    r.1.len()
                ));
            }
        }
        // Device addresses first; the usage records (cudarc's stream-ordering events) are kept
        // until the group has been issued, so they cover the NCCL operations.
        let mut keep = Vec::with_capacity(sends.len() + recvs.len());
        let mut src = Vec::with_capacity(sends.len());
        for (r, b) in sends.iter() {
            let (p, sync) = b.cuda_slice().device_ptr(&self.streams[*r]);
            src.push((*r, p));
            keep.push(sync);
        }
        let mut dst = Vec::with_capacity(recvs.len());
        for (r, b) in recvs.iter_mut() {
            let (p, sync) = b.cuda_slice_mut().device_ptr_mut(&self.streams[*r]);
            dst.push((*r, p));
            keep.push(sync);
        }
        self.group_start()?;
        let mut posted = Ok(());
        for t in transfers {
            let (sr, sp) = src[t.from_buf];
            let (rr, rp) = dst[t.to_buf];
            let count = t.from.len();
            if count == 0 {
                continue;
            }
            // SAFETY: the ranges were checked against the buffers above; each pointer is a
            // device allocation on its rank's device and the stream is that rank's; NCCL reads
            // (send) and writes (recv) them on those streams once the group is issued.
            let rc = unsafe {
                (self.lib.send)(
                    (sp + (t.from.start * 8) as u64) as *const c_void,
                    count,
                    ncclDataType_t::ncclFloat64,
                    rr as c_int,
                    self.comms[sr],
                    self.streams[sr].cu_stream() as *mut c_void,
                )
            };
            posted = self.lib.check("ncclSend", rc);
            if posted.is_err() {
                break;
            }
            // SAFETY: as above.
            let rc = unsafe {
                (self.lib.recv)(
                    (rp + (t.to_at * 8) as u64) as *mut c_void,
                    count,
                    ncclDataType_t::ncclFloat64,
                    sr as c_int,
                    self.comms[rr],
                    self.streams[rr].cu_stream() as *mut c_void,
                )
            };
            posted = self.lib.check("ncclRecv", rc);
            if posted.is_err() {
                break;
            }
        }
        let ended = self.group_end();
        drop(keep);
        posted.and(ended)
    }

    fn group_start(&self) -> GpuResult<()> {
        // SAFETY: ncclGroupStart takes no arguments; every caller ends the group.
        let rc = unsafe { (self.lib.group_start)() };
        self.lib.check("ncclGroupStart", rc)
    }
    fn group_end(&self) -> GpuResult<()> {
        // SAFETY: closes the group opened by `group_start`.
        let rc = unsafe { (self.lib.group_end)() };
        self.lib.check("ncclGroupEnd", rc)
    }

    /// `recv[r] = Σ_ranks send[rank]` elementwise for every rank `r` (`ncclAllReduce` with
    /// `ncclSum` in one group): one buffer per rank, all of the same length, on that rank's device.
    pub fn all_reduce_sum(
        &self,
        send: &[&DeviceBuffer<f64>],
        recv: &mut [&mut DeviceBuffer<f64>],
    ) -> GpuResult<()> {
        let n = self.ranks();
        if send.len() != n || recv.len() != n {
            return Err(GpuError::InvalidArgument(format!(
                "all-reduce over {n} ranks with {} send and {} receive buffers",
                send.len(),
                recv.len()
            )));
        }
        let len = send[0].len();
        if send.iter().any(|b| b.len() != len) || recv.iter().any(|b| b.len() != len) {
            return Err(GpuError::InvalidArgument(
                "all-reduce buffers of different lengths".into(),
            ));
        }
        let mut keep = Vec::with_capacity(2 * n);
        let mut ptrs = Vec::with_capacity(n);
        for (r, (s, d)) in send.iter().zip(recv.iter_mut()).enumerate() {
            let (sp, s1) = s.cuda_slice().device_ptr(&self.streams[r]);
            let (dp, s2) = d.cuda_slice_mut().device_ptr_mut(&self.streams[r]);
            ptrs.push((sp, dp));
            keep.push(s1);
            keep.push(s2);
        }
        self.group_start()?;
        let mut posted = Ok(());
        for (r, &(sp, dp)) in ptrs.iter().enumerate() {
            // SAFETY: both pointers are device allocations of `len` doubles on rank r's
            // device; the stream is that device's; NCCL enqueues the reduction on it.
            let rc = unsafe {
                (self.lib.all_reduce)(
                    sp as *const c_void,
                    dp as *mut c_void,
                    len,
                    ncclDataType_t::ncclFloat64,
                    ncclRedOp_t::ncclSum,
                    self.comms[r],
                    self.streams[r].cu_stream() as *mut c_void,
                )
            };
            posted = self.lib.check("ncclAllReduce", rc);
            if posted.is_err() {
                break;
            }
        }
        let ended = self.group_end();
        drop(keep);
        posted.and(ended)
    }
}

/// One point-to-point transfer of [`NcclComm::exchange`]: elements `from` of send buffer
/// `from_buf` into receive buffer `to_buf` from element `to_at` on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transfer {
    pub from_buf: usize,
    pub from: Range<usize>,
    pub to_buf: usize,
    pub to_at: usize,
}

impl Drop for NcclComm {
    fn drop(&mut self) {
        for &c in &self.comms {
            if !c.is_null() {
                // SAFETY: `c` came from ncclCommInitAll and is destroyed once; errors at
                // teardown are ignored (nothing can be done about them here).
                let _ = unsafe { (self.lib.destroy)(c) };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_nccl_is_a_typed_error_not_a_panic() {
        let empty = std::env::temp_dir().join("tessera-no-nccl-here");
        let _ = std::fs::create_dir_all(&empty);
        // the loader path may hold NCCL on a GPU machine; only the folder search is checked
        assert!(nccl_candidates(std::slice::from_ref(&empty)).is_empty());
        let msg = not_found_message("");
        assert!(
            msg.starts_with("NCCL library not found: libnccl.so.2;"),
            "{msg}"
        );
        // the process-wide loader answers Ok or the typed error, never a panic
        match NcclLibrary::load() {
            Ok(l) => assert!(l.version() > 20000, "{l:?}"),
            Err(e) => {
                assert!(matches!(e, GpuError::NoNccl(_)), "{e}");
                assert!(
                    e.to_string()
                        .contains("NCCL library not found: libnccl.so.2"),
                    "{e}"
                );
            }
        }
        // and it keeps NVLink multicast off (set to 0 unless the environment set it)
        assert!(std::env::var_os("NCCL_NVLS_ENABLE").is_some());
    }

    #[test]
    fn a_file_that_is_not_nccl_is_reported_with_its_path() {
        let dir = std::env::temp_dir().join(format!("tessera-fake-nccl-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(NCCL_SONAME), b"not a library").unwrap();
        let cands = nccl_candidates(std::slice::from_ref(&dir));
        assert_eq!(cands, vec![dir.join(NCCL_SONAME)]);
        // the loader path is tried first and may hold a real NCCL; if not, the fake is named
        if let Err(e) = load_from(std::slice::from_ref(&dir)) {
            assert!(e.contains("NCCL library not found"), "{e}");
            assert!(e.contains(&dir.display().to_string()), "{e}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn duplicate_devices_are_refused() {
        assert!(check_distinct_devices(&[0, 1]).is_ok());
        assert!(check_distinct_devices(&[0]).is_ok());
        let e = check_distinct_devices(&[0, 0]).unwrap_err().to_string();
        assert!(e.contains("cuda:0 appears twice"), "{e}");
        assert!(check_distinct_devices(&[]).is_err());
    }

    #[test]
    fn search_dirs_include_system_folders() {
        let d = nccl_search_dirs();
        assert!(d.iter().any(|p| p.ends_with("/usr/lib/x86_64-linux-gnu")));
    }
}
