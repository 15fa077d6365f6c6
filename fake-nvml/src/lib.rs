//! A stand-in for `libnvidia-ml.so.1` so the NVML code path (nvml-wrapper, dlopen,
//! symbol lookup, error mapping) runs in tests on machines without a GPU.
//!
//! It exports the NVML symbols sweeptop's `gpu` module calls. nvml-wrapper looks
//! every symbol up when it loads the library and fails only the calls whose symbol
//! is missing, so this is all it needs. Everything is configured by environment
//! variables, read on every call:
//!
//! | variable | meaning | default |
//! | --- | --- | --- |
//! | `FAKE_NVML_GPUS` | device count | 1 |
//! | `FAKE_NVML_INIT_ERROR` | `nvmlInit` fails: `driver_not_loaded`, `no_permission`, `library_not_found`, `lib_rm_version_mismatch`, `unknown`, or a numeric NVML return code | succeeds |
//! | `FAKE_NVML_NOT_SUPPORTED` | comma list of metrics answering NOT_SUPPORTED: `name`, `util`, `memory`, `temperature`, `power`, `power_limit`, `clock`, `processes` | none |
//! | `FAKE_NVML_UTIL` | GPU utilisation %, one value for all GPUs or a comma list by index | 0 |
//! | `FAKE_NVML_MEM_USED_MIB` | used MiB, one value or a list by index | sum of the GPU's processes |
//! | `FAKE_NVML_MEM_TOTAL_MIB` | total MiB, one value or a list by index | 143771 |
//! | `FAKE_NVML_PROCS` | compute processes `gpu:pid:mib,…`; `mib` may be `na` | none |
//! | `FAKE_NVML_DRIVER_VERSION` | driver version string | 550.54.15 |
//!
//! Devices are named "Fake H200 #N". Temperature, power and SM clock follow the
//! utilisation: 30 + 0.45·util °C, 75 + 6·util W (limit 700 W), 1980 MHz busy /
//! 345 MHz idle.
//!
//! No function here may panic: a panic cannot unwind through `extern "C"`.

use std::ffi::{c_char, c_int, c_uint, c_ulonglong, c_void};
use std::sync::atomic::{AtomicU32, Ordering};

type NvmlReturn = c_uint;
type NvmlDevice = *mut c_void;

const SUCCESS: NvmlReturn = 0;
const ERROR_UNINITIALIZED: NvmlReturn = 1;
const ERROR_INVALID_ARGUMENT: NvmlReturn = 2;
const ERROR_NOT_SUPPORTED: NvmlReturn = 3;
const ERROR_NO_PERMISSION: NvmlReturn = 4;
const ERROR_INSUFFICIENT_SIZE: NvmlReturn = 7;
const ERROR_DRIVER_NOT_LOADED: NvmlReturn = 9;
const ERROR_LIBRARY_NOT_FOUND: NvmlReturn = 12;
const ERROR_LIB_RM_VERSION_MISMATCH: NvmlReturn = 18;
const ERROR_ARGUMENT_VERSION_MISMATCH: NvmlReturn = 25;
const ERROR_UNKNOWN: NvmlReturn = 999;

const TEMPERATURE_GPU: c_uint = 0;
/// NVML_CLOCK_GRAPHICS, _SM, _MEM, _VIDEO.
const CLOCK_TYPES: c_uint = 4;
const VALUE_NOT_AVAILABLE: c_ulonglong = c_ulonglong::MAX;
const NO_INSTANCE: c_uint = 0xFFFF_FFFF;
const MIB: c_ulonglong = 1024 * 1024;
const MAX_GPUS: u32 = 64;

/// nvmlMemory_v2_t.
#[repr(C)]
pub struct NvmlMemoryV2 {
    pub version: c_uint,
    pub total: c_ulonglong,
    pub reserved: c_ulonglong,
    pub free: c_ulonglong,
    pub used: c_ulonglong,
}

/// nvmlMemory_t (v1).
#[repr(C)]
pub struct NvmlMemory {
    pub total: c_ulonglong,
    pub free: c_ulonglong,
    pub used: c_ulonglong,
}

/// nvmlUtilization_t.
#[repr(C)]
pub struct NvmlUtilization {
    pub gpu: c_uint,
    pub memory: c_uint,
}

/// nvmlProcessInfo_t as the `_v3` process queries fill it.
#[repr(C)]
pub struct NvmlProcessInfo {
    pub pid: c_uint,
    pub used_gpu_memory: c_ulonglong,
    pub gpu_instance_id: c_uint,
    pub compute_instance_id: c_uint,
}

/// NVML_STRUCT_VERSION(Memory, 2).
const MEMORY_V2_VERSION: c_uint = (std::mem::size_of::<NvmlMemoryV2>() as c_uint) | (2 << 24);

/// nvmlInit is reference-counted in real NVML; calls between init and shutdown only.
static INIT_COUNT: AtomicU32 = AtomicU32::new(0);

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

fn gpu_count() -> u32 {
    env("FAKE_NVML_GPUS")
        .and_then(|v| v.trim().parse::<u32>().ok())
        .unwrap_or(1)
        .min(MAX_GPUS)
}

/// A per-GPU value: one number for all GPUs, or a comma list by index.
fn per_gpu(name: &str, index: u32) -> Option<u64> {
    let value = env(name)?;
    let entries: Vec<&str> = value.split(',').map(str::trim).collect();
    let entry = if entries.len() == 1 {
        entries.first()
    } else {
        entries.get(index as usize)
    };
    entry.and_then(|e| e.parse::<u64>().ok())
}

fn not_supported(metric: &str) -> bool {
    env("FAKE_NVML_NOT_SUPPORTED")
        .map(|v| v.split(',').any(|m| m.trim() == metric))
        .unwrap_or(false)
}

struct FakeProcess {
    gpu: u32,
    pid: u32,
    used_mib: Option<u64>,
}

fn processes(gpu: u32) -> Vec<FakeProcess> {
    let Some(value) = env("FAKE_NVML_PROCS") else {
        return Vec::new();
    };
    value
        .split(',')
        .filter_map(|entry| {
            let mut parts = entry.trim().split(':');
            let gpu = parts.next()?.trim().parse().ok()?;
            let pid = parts.next()?.trim().parse().ok()?;
            let used_mib = parts.next().and_then(|m| m.trim().parse().ok());
            Some(FakeProcess { gpu, pid, used_mib })
        })
        .filter(|p| p.gpu == gpu)
        .collect()
}

fn util(index: u32) -> u32 {
    per_gpu("FAKE_NVML_UTIL", index)
        .map(|u| u.min(100) as u32)
        .unwrap_or(0)
}

fn mem_total_mib(index: u32) -> u64 {
    per_gpu("FAKE_NVML_MEM_TOTAL_MIB", index).unwrap_or(143_771)
}

fn mem_used_mib(index: u32) -> u64 {
    let used = per_gpu("FAKE_NVML_MEM_USED_MIB", index).unwrap_or_else(|| {
        processes(index)
            .iter()
            .filter_map(|p| p.used_mib)
            .fold(0u64, u64::saturating_add)
    });
    used.min(mem_total_mib(index))
}

/// Checks that NVML is initialised and the handle names a device; gives its index.
fn device_index(device: NvmlDevice) -> Result<u32, NvmlReturn> {
    if INIT_COUNT.load(Ordering::SeqCst) == 0 {
        return Err(ERROR_UNINITIALIZED);
    }
    // Handles are index + 1, so that none is null.
    let raw = device as usize;
    if raw == 0 || raw > gpu_count() as usize {
        return Err(ERROR_INVALID_ARGUMENT);
    }
    Ok((raw - 1) as u32)
}

fn check(metric: &str, device: NvmlDevice) -> Result<u32, NvmlReturn> {
    let index = device_index(device)?;
    if not_supported(metric) {
        return Err(ERROR_NOT_SUPPORTED);
    }
    Ok(index)
}

/// Writes `text` NUL-terminated into a caller's buffer of `len` bytes.
///
/// # Safety
/// `buf` must be null or valid for `len` bytes of writes.
unsafe fn write_str(text: &str, buf: *mut c_char, len: c_uint) -> NvmlReturn {
    if buf.is_null() {
        return ERROR_INVALID_ARGUMENT;
    }
    let bytes = text.as_bytes();
    if bytes.len() + 1 > len as usize {
        return ERROR_INSUFFICIENT_SIZE;
    }
    std::ptr::copy_nonoverlapping(bytes.as_ptr(), buf.cast::<u8>(), bytes.len());
    *buf.add(bytes.len()) = 0;
    SUCCESS
}

/// Writes a value through an out-pointer, refusing null.
///
/// # Safety
/// `out` must be null or valid for a write of `T`.
unsafe fn put<T>(out: *mut T, value: T) -> NvmlReturn {
    if out.is_null() {
        return ERROR_INVALID_ARGUMENT;
    }
    out.write(value);
    SUCCESS
}

fn init() -> NvmlReturn {
    if let Some(error) = env("FAKE_NVML_INIT_ERROR") {
        return match error.trim() {
            "driver_not_loaded" => ERROR_DRIVER_NOT_LOADED,
            "no_permission" => ERROR_NO_PERMISSION,
            "library_not_found" => ERROR_LIBRARY_NOT_FOUND,
            "lib_rm_version_mismatch" => ERROR_LIB_RM_VERSION_MISMATCH,
            other => other.parse().unwrap_or(ERROR_UNKNOWN),
        };
    }
    INIT_COUNT.fetch_add(1, Ordering::SeqCst);
    SUCCESS
}

#[no_mangle]
pub extern "C" fn nvmlInit_v2() -> NvmlReturn {
    init()
}

#[no_mangle]
pub extern "C" fn nvmlInit() -> NvmlReturn {
    init()
}

#[no_mangle]
pub extern "C" fn nvmlInitWithFlags(_flags: c_uint) -> NvmlReturn {
    init()
}

#[no_mangle]
pub extern "C" fn nvmlShutdown() -> NvmlReturn {
    match INIT_COUNT.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)) {
        Ok(_) => SUCCESS,
        Err(_) => ERROR_UNINITIALIZED,
    }
}

#[no_mangle]
pub extern "C" fn nvmlErrorString(result: NvmlReturn) -> *const c_char {
    let text: &'static [u8] = match result {
        SUCCESS => b"Success\0",
        ERROR_UNINITIALIZED => b"Uninitialized\0",
        ERROR_INVALID_ARGUMENT => b"Invalid Argument\0",
        ERROR_NOT_SUPPORTED => b"Not Supported\0",
        ERROR_NO_PERMISSION => b"Insufficient Permissions\0",
        ERROR_INSUFFICIENT_SIZE => b"Insufficient Size\0",
        ERROR_DRIVER_NOT_LOADED => b"Driver Not Loaded\0",
        ERROR_LIBRARY_NOT_FOUND => b"NVML Shared Library Not Found\0",
        ERROR_LIB_RM_VERSION_MISMATCH => b"RM has detected an NVML/RM version mismatch.\0",
        ERROR_ARGUMENT_VERSION_MISMATCH => b"Argument version mismatch\0",
        _ => b"Unknown Error\0",
    };
    text.as_ptr().cast()
}

/// # Safety
/// `version` must be valid for `length` bytes of writes.
#[no_mangle]
pub unsafe extern "C" fn nvmlSystemGetDriverVersion(
    version: *mut c_char,
    length: c_uint,
) -> NvmlReturn {
    if INIT_COUNT.load(Ordering::SeqCst) == 0 {
        return ERROR_UNINITIALIZED;
    }
    let driver = env("FAKE_NVML_DRIVER_VERSION").unwrap_or_else(|| "550.54.15".to_string());
    write_str(&driver, version, length)
}

/// # Safety
/// `version` must be valid for one `c_int` write.
#[no_mangle]
pub unsafe extern "C" fn nvmlSystemGetCudaDriverVersion_v2(version: *mut c_int) -> NvmlReturn {
    if INIT_COUNT.load(Ordering::SeqCst) == 0 {
        return ERROR_UNINITIALIZED;
    }
    if version.is_null() {
        return ERROR_INVALID_ARGUMENT;
    }
    // 12.4, as `FAKE_NVML_CUDA_VERSION` may override (12040 = 12.4).
    let v = env("FAKE_NVML_CUDA_VERSION")
        .and_then(|v| v.parse().ok())
        .unwrap_or(12040);
    *version = v;
    SUCCESS
}

/// # Safety
/// `version` must be valid for `length` bytes of writes.
#[no_mangle]
pub unsafe extern "C" fn nvmlSystemGetNVMLVersion(
    version: *mut c_char,
    length: c_uint,
) -> NvmlReturn {
    if INIT_COUNT.load(Ordering::SeqCst) == 0 {
        return ERROR_UNINITIALIZED;
    }
    write_str("12.550.54.15", version, length)
}

/// # Safety
/// `count` must be valid for a write.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetCount_v2(count: *mut c_uint) -> NvmlReturn {
    if INIT_COUNT.load(Ordering::SeqCst) == 0 {
        return ERROR_UNINITIALIZED;
    }
    put(count, gpu_count())
}

/// # Safety
/// `device` must be valid for a write.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetHandleByIndex_v2(
    index: c_uint,
    device: *mut NvmlDevice,
) -> NvmlReturn {
    if INIT_COUNT.load(Ordering::SeqCst) == 0 {
        return ERROR_UNINITIALIZED;
    }
    if index >= gpu_count() {
        return ERROR_INVALID_ARGUMENT;
    }
    put(device, (index as usize + 1) as NvmlDevice)
}

/// # Safety
/// `name` must be valid for `length` bytes of writes.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetName(
    device: NvmlDevice,
    name: *mut c_char,
    length: c_uint,
) -> NvmlReturn {
    match check("name", device) {
        Ok(index) => write_str(&format!("Fake H200 #{index}"), name, length),
        Err(code) => code,
    }
}

/// # Safety
/// `utilization` must be valid for a write.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetUtilizationRates(
    device: NvmlDevice,
    utilization: *mut NvmlUtilization,
) -> NvmlReturn {
    match check("util", device) {
        Ok(index) => {
            let gpu = util(index);
            put(
                utilization,
                NvmlUtilization {
                    gpu,
                    memory: gpu / 2,
                },
            )
        }
        Err(code) => code,
    }
}

/// # Safety
/// `memory` must be valid for reads and writes of an `nvmlMemory_v2_t`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetMemoryInfo_v2(
    device: NvmlDevice,
    memory: *mut NvmlMemoryV2,
) -> NvmlReturn {
    let index = match check("memory", device) {
        Ok(index) => index,
        Err(code) => return code,
    };
    if memory.is_null() {
        return ERROR_INVALID_ARGUMENT;
    }
    // Like the real library: the caller must say which struct layout it passed.
    if (*memory).version != MEMORY_V2_VERSION {
        return ERROR_ARGUMENT_VERSION_MISMATCH;
    }
    let total = mem_total_mib(index).saturating_mul(MIB);
    let used = mem_used_mib(index).saturating_mul(MIB);
    put(
        memory,
        NvmlMemoryV2 {
            version: MEMORY_V2_VERSION,
            total,
            reserved: 0,
            free: total.saturating_sub(used),
            used,
        },
    )
}

/// # Safety
/// `memory` must be valid for a write of an `nvmlMemory_t`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetMemoryInfo(
    device: NvmlDevice,
    memory: *mut NvmlMemory,
) -> NvmlReturn {
    match check("memory", device) {
        Ok(index) => {
            let total = mem_total_mib(index).saturating_mul(MIB);
            let used = mem_used_mib(index).saturating_mul(MIB);
            put(
                memory,
                NvmlMemory {
                    total,
                    free: total.saturating_sub(used),
                    used,
                },
            )
        }
        Err(code) => code,
    }
}

/// # Safety
/// `temp` must be valid for a write.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetTemperature(
    device: NvmlDevice,
    sensor: c_uint,
    temp: *mut c_uint,
) -> NvmlReturn {
    match check("temperature", device) {
        Ok(_) if sensor != TEMPERATURE_GPU => ERROR_INVALID_ARGUMENT,
        Ok(index) => put(temp, 30 + util(index) * 45 / 100),
        Err(code) => code,
    }
}

/// # Safety
/// `power` must be valid for a write.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetPowerUsage(
    device: NvmlDevice,
    power: *mut c_uint,
) -> NvmlReturn {
    match check("power", device) {
        Ok(index) => put(power, (75 + 6 * util(index)) * 1000),
        Err(code) => code,
    }
}

/// # Safety
/// `limit` must be valid for a write.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetEnforcedPowerLimit(
    device: NvmlDevice,
    limit: *mut c_uint,
) -> NvmlReturn {
    match check("power_limit", device) {
        Ok(_) => put(limit, 700_000),
        Err(code) => code,
    }
}

/// # Safety
/// `clock` must be valid for a write.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetClockInfo(
    device: NvmlDevice,
    clock_type: c_uint,
    clock: *mut c_uint,
) -> NvmlReturn {
    match check("clock", device) {
        Ok(_) if clock_type >= CLOCK_TYPES => ERROR_INVALID_ARGUMENT,
        Ok(index) => put(clock, if util(index) > 0 { 1980 } else { 345 }),
        Err(code) => code,
    }
}

/// With `infos` null or `*count` too small, stores the number of processes in
/// `*count` and answers INSUFFICIENT_SIZE (SUCCESS when there are none), as NVML does.
///
/// # Safety
/// `count` must be valid for reads and writes; `infos` null or valid for `*count`
/// entries.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetComputeRunningProcesses_v3(
    device: NvmlDevice,
    count: *mut c_uint,
    infos: *mut NvmlProcessInfo,
) -> NvmlReturn {
    let index = match check("processes", device) {
        Ok(index) => index,
        Err(code) => return code,
    };
    if count.is_null() {
        return ERROR_INVALID_ARGUMENT;
    }
    let procs = processes(index);
    let n = procs.len() as c_uint;
    if infos.is_null() || *count < n {
        *count = n;
        return if n == 0 {
            SUCCESS
        } else {
            ERROR_INSUFFICIENT_SIZE
        };
    }
    for (i, p) in procs.iter().enumerate() {
        infos.add(i).write(NvmlProcessInfo {
            pid: p.pid,
            used_gpu_memory: p
                .used_mib
                .map_or(VALUE_NOT_AVAILABLE, |m| m.saturating_mul(MIB)),
            gpu_instance_id: NO_INSTANCE,
            compute_instance_id: NO_INSTANCE,
        });
    }
    *count = n;
    SUCCESS
}
