//! The simulated source: H200-like figures that follow what the engine says it is
//! doing ([`SimGpus::set`]), so the demo and the tests see GPUs fill when a server
//! loads its model, get busy while a cell is in flight, and empty when it stops.

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

use super::{process_name, GpuProcess, GpuSample};

const NAME: &str = "Simulated H200";
const MEM_TOTAL_MIB: u64 = 143_771;
/// Share of memory a running server's weights and KV cache take.
const SERVER_MEM_SHARE: f64 = 0.75;
/// Memory the CUDA context takes that NVML does not charge to the process.
const CONTEXT_MIB: f64 = 512.0;
/// Fraction of the way to the target memory each sample moves while loading.
const LOAD_STEP: f64 = 0.5;
/// Fraction of the way to the target temperature each sample moves.
const THERMAL_STEP: f64 = 0.3;
const IDLE_POWER_W: f64 = 75.0;
const POWER_PER_UTIL_W: f64 = 6.0;
const POWER_LIMIT_W: f64 = 700.0;
const SM_CLOCK_BUSY_MHZ: u32 = 1980;
const SM_CLOCK_IDLE_MHZ: u32 = 345;

/// Simulated GPUs; clones share one state, so the engine keeps a clone to drive
/// it while the sampler thread reads it.
#[derive(Clone)]
pub struct SimGpus {
    count: u32,
    load: Arc<Mutex<SimLoad>>,
}

struct SimLoad {
    /// Each running server: its pid, its GPUs, and whether a cell is in flight.
    servers: Vec<SimServer>,
    gpus: Vec<SimGpu>,
    rng: u64,
}

struct SimServer {
    pid: u32,
    gpus: Vec<u32>,
    busy: bool,
}

#[derive(Clone, Copy)]
struct SimGpu {
    mem_mib: f64,
    temp_c: f64,
}

impl SimGpus {
    pub fn new(count: u32) -> SimGpus {
        let idle = SimGpu {
            mem_mib: 0.0,
            temp_c: 30.0,
        };
        SimGpus {
            count,
            load: Arc::new(Mutex::new(SimLoad {
                servers: Vec::new(),
                gpus: vec![idle; count as usize],
                rng: 0x9E37_79B9_7F4A_7C15 ^ u64::from(count),
            })),
        }
    }

    pub fn count(&self) -> u32 {
        self.count
    }

    /// Says that a server (by pid) runs on these GPUs, and whether a cell is
    /// in flight on it; several servers may run on different GPUs.
    pub fn set(&self, server_pid: u32, gpus: &[u32], busy: bool) {
        let mut load = self.lock();
        load.servers.retain(|s| s.pid != server_pid);
        load.servers.push(SimServer {
            pid: server_pid,
            gpus: gpus.to_vec(),
            busy,
        });
    }

    /// Whether a cell is in flight on a running server.
    pub fn busy(&self, server_pid: u32, busy: bool) {
        let mut load = self.lock();
        if let Some(s) = load.servers.iter_mut().find(|s| s.pid == server_pid) {
            s.busy = busy;
        }
    }

    /// The server stopped: its GPUs empty.
    pub fn remove(&self, server_pid: u32) {
        self.lock().servers.retain(|s| s.pid != server_pid);
    }

    /// Advances the simulation by one sample.
    pub(crate) fn sample(&self, ours: &dyn Fn(u32) -> bool) -> Vec<GpuSample> {
        let mut load = self.lock();
        let load = &mut *load;
        let mut samples = Vec::with_capacity(load.gpus.len());
        for index in 0..self.count {
            let server = load.servers.iter().find(|s| s.gpus.contains(&index));
            let (used_by_server, busy, server_pid) =
                server.map_or((false, false, None), |s| (true, s.busy, Some(s.pid)));
            let util = if used_by_server && busy {
                85 + (next_random(&mut load.rng) % 15) as u32
            } else if used_by_server {
                (next_random(&mut load.rng) % 2) as u32
            } else {
                0
            };
            let Some(gpu) = load.gpus.get_mut(index as usize) else {
                continue;
            };

            let target_mem = if used_by_server {
                let activations = if busy { 300.0 } else { 0.0 };
                MEM_TOTAL_MIB as f64 * SERVER_MEM_SHARE + activations
            } else {
                0.0
            };
            // Loading a model takes a few samples; an exiting process frees at once.
            gpu.mem_mib = if target_mem > gpu.mem_mib {
                gpu.mem_mib + (target_mem - gpu.mem_mib) * LOAD_STEP
            } else {
                target_mem
            };
            let target_temp = 30.0 + 0.45 * f64::from(util);
            gpu.temp_c += (target_temp - gpu.temp_c) * THERMAL_STEP;

            let jitter = (next_random(&mut load.rng) % 1000) as f64 / 100.0;
            let power =
                (IDLE_POWER_W + POWER_PER_UTIL_W * f64::from(util) + jitter).min(POWER_LIMIT_W);
            let clock = if util > 0 {
                SM_CLOCK_BUSY_MHZ - (next_random(&mut load.rng) % 60) as u32
            } else {
                SM_CLOCK_IDLE_MHZ
            };
            let mem_used = gpu.mem_mib.round() as u64;
            let processes = match server_pid {
                Some(pid) if used_by_server && gpu.mem_mib > CONTEXT_MIB => vec![GpuProcess {
                    pid,
                    name: sim_process_name(pid),
                    used_mib: Some((gpu.mem_mib - CONTEXT_MIB).round() as u64),
                    ours: ours(pid),
                }],
                _ => Vec::new(),
            };
            samples.push(GpuSample {
                index,
                name: NAME.to_string(),
                util_pct: Some(util),
                mem_used_mib: Some(mem_used.min(MEM_TOTAL_MIB)),
                mem_total_mib: Some(MEM_TOTAL_MIB),
                temp_c: Some(gpu.temp_c.round() as u32),
                power_w: Some((power * 10.0).round() / 10.0),
                power_limit_w: Some(POWER_LIMIT_W),
                sm_clock_mhz: Some(clock),
                processes,
            });
        }
        samples
    }

    fn lock(&self) -> MutexGuard<'_, SimLoad> {
        // The state stays consistent even if a holder panicked: use it anyway.
        self.load
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl fmt::Debug for SimGpus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimGpus")
            .field("count", &self.count)
            .finish_non_exhaustive()
    }
}

fn sim_process_name(pid: u32) -> String {
    match process_name(pid) {
        name if name == "?" => "sim-server".to_string(),
        name => name,
    }
}

/// xorshift64: jitter without a dependency; quality does not matter here.
fn next_random(state: &mut u64) -> u64 {
    let mut x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *state = x;
    x
}
