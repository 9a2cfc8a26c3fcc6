//! `device="auto"|"cpu"|"cuda"|"cuda:N"` as on the command line (DESIGN.md: auto = CUDA when
//! a driver and device are present). A GPU context is expensive to create (context, kernel
//! loading), so each opened device is kept for the life of the process and shared by all
//! calls.

use crate::errors::value_error;
use pyo3::prelude::*;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use tessera_core::DeviceChoice;
use tessera_gpu::Gpu;

static OPENED: OnceLock<Mutex<HashMap<String, Option<Arc<Gpu>>>>> = OnceLock::new();

/// Parse a device string (ValueError on anything but auto, cpu, cuda, cuda:N).
pub fn parse(device: &str) -> PyResult<DeviceChoice> {
    device.parse::<DeviceChoice>().map_err(|_| {
        value_error(format!(
            "device {device:?}: expected \"auto\", \"cpu\", \"cuda\" or \"cuda:N\""
        ))
    })
}

/// The GPU to run on for `device` (None: the CPU). `cuda[:N]` that cannot be used raises
/// `DeviceError` with the reason; `auto` falls back to the CPU.
pub fn open(py: Python<'_>, device: &str) -> PyResult<Option<Arc<Gpu>>> {
    let choice = parse(device)?;
    if choice == DeviceChoice::Cpu {
        return Ok(None);
    }
    let key = choice.to_string();
    let map = OPENED.get_or_init(|| Mutex::new(HashMap::new()));
    if let Some(g) = map.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
        return Ok(g.clone());
    }
    // opening a context can take a second: without the GIL
    let opened = py.allow_threads(|| Gpu::open(choice));
    let g = match opened {
        Ok(g) => g.map(Arc::new),
        Err(e) => {
            return Err(crate::errors::raise(
                "DeviceError",
                format!(
                    "device {device} is not usable: {}",
                    e.to_string().replace('\n', " ")
                ),
            ))
        }
    };
    map.lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(key, g.clone());
    Ok(g)
}

/// The name of the device `device` resolves to: `cpu` or `cuda:N`.
pub fn name_of(gpu: &Option<Arc<Gpu>>) -> String {
    match gpu {
        Some(g) => format!("cuda:{}", g.ordinal()),
        None => "cpu".to_string(),
    }
}

/// `tessera.device(device="auto")`: what a call with this device runs on, as one line
/// (`cpu (N threads)` or the GPU's name, compute capability and memory).
#[pyfunction]
#[pyo3(signature = (device = "auto"))]
pub fn describe_device(py: Python<'_>, device: &str) -> PyResult<String> {
    Ok(match open(py, device)? {
        Some(g) => g.describe(),
        None => {
            let n = rayon_threads();
            format!("cpu ({n} thread{})", if n == 1 { "" } else { "s" })
        }
    })
}

fn rayon_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}
