//! The sampler thread: owns the source (and so the NVML handle), samples on a fixed
//! cadence, hands each snapshot to a sink, and stops as soon as it is told to.

use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use super::nvml::NvmlProbe;
use super::{GpuSnapshot, GpuSource, GpuStatus, SimGpus};
use crate::model::Timestamp;

/// Shortest sampling interval: NVML's own counters update no faster than this.
pub const MIN_INTERVAL: Duration = Duration::from_millis(250);

/// A source opened for sampling: NVML keeps its handle between samples.
enum Probe {
    // Boxed: nvml-wrapper's symbol table is ~12 KB.
    Nvml(Box<NvmlProbe>),
    Simulated(SimGpus),
    Disabled,
}

impl Probe {
    fn open(source: &GpuSource) -> Probe {
        match source {
            GpuSource::Nvml { lib_path } => Probe::Nvml(Box::new(NvmlProbe::new(lib_path.clone()))),
            GpuSource::Simulated(sim) => Probe::Simulated(sim.clone()),
            GpuSource::Disabled => Probe::Disabled,
        }
    }

    fn sample(&mut self, ours: &dyn Fn(u32) -> bool) -> GpuSnapshot {
        let (status, gpus) = match self {
            Probe::Nvml(probe) => probe.sample(ours),
            Probe::Simulated(sim) => (GpuStatus::Simulated, sim.sample(ours)),
            Probe::Disabled => (GpuStatus::Disabled, Vec::new()),
        };
        GpuSnapshot::now(status, gpus)
    }
}

/// One snapshot, opening and closing the source around it (`sweeptop gpus`,
/// preflight). Blocks for as long as the driver takes; call it off the runtime.
pub fn sample_once(source: &GpuSource, ours: &dyn Fn(u32) -> bool) -> GpuSnapshot {
    Probe::open(source).sample(ours)
}

/// Handle to the sampler thread. Dropping it stops the thread and waits for it.
#[derive(Debug)]
pub struct Sampler {
    stop: Option<Sender<()>>,
    thread: Option<JoinHandle<()>>,
    spawn_error: Option<String>,
}

impl Sampler {
    /// Stops the thread and waits for the sample in progress, if any, to finish.
    pub fn stop(mut self) {
        self.shutdown();
    }

    /// True once the thread has ended (stopped, or its sink returned false).
    pub fn is_finished(&self) -> bool {
        match &self.thread {
            Some(thread) => thread.is_finished(),
            None => true,
        }
    }

    /// Why the thread could not be started, if it could not.
    pub fn spawn_error(&self) -> Option<&str> {
        self.spawn_error.as_deref()
    }

    fn shutdown(&mut self) {
        // Dropping the sender wakes the thread's recv_timeout with Disconnected.
        self.stop.take();
        if let Some(thread) = self.thread.take() {
            // A sink that drops its own sampler must not join itself.
            if thread.thread().id() != thread::current().id() {
                let _ = thread.join();
            }
        }
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// The wall-clock time of a sampler's ticks. A snapshot is stamped with the
/// tick it belongs to, not with when the driver calls returned (their time
/// varies with load), so snapshots are at least an interval apart. The ticks
/// are mapped from the monotonic clock, re-anchored when the wall clock has
/// moved more than a second away from the mapping (an NTP step), so a stamp
/// stays comparable with the cells' wall-clock windows.
struct TickClock {
    anchor: Instant,
    anchor_ms: u64,
}

impl TickClock {
    const DRIFT_MS: u64 = 1000;

    fn new(anchor: Instant) -> TickClock {
        TickClock {
            anchor,
            anchor_ms: now_ms(),
        }
    }

    /// The stamp of the tick at `tick`, for a sample read at `read_ms`.
    fn stamp(&mut self, tick: Instant, read_ms: u64) -> u64 {
        let since = u64::try_from(tick.duration_since(self.anchor).as_millis()).unwrap_or(u64::MAX);
        let mapped = self.anchor_ms.saturating_add(since);
        if mapped.abs_diff(read_ms) > Self::DRIFT_MS {
            self.anchor = tick;
            self.anchor_ms = read_ms;
            return read_ms;
        }
        mapped
    }
}

fn now_ms() -> u64 {
    u64::try_from(Timestamp::now().unix_ms()).unwrap_or(0)
}

/// Starts the "gpu-sampler" thread: samples at once, then every `interval`
/// (at least [`MIN_INTERVAL`]), and passes each snapshot to `sink` until the sink
/// returns false or the [`Sampler`] is stopped or dropped. `ours(pid)` says
/// whether a process belongs to the sweep's server.
pub fn spawn_sampler(
    source: GpuSource,
    interval: Duration,
    ours: Arc<dyn Fn(u32) -> bool + Send + Sync>,
    sink: Box<dyn FnMut(GpuSnapshot) -> bool + Send>,
) -> Sampler {
    let interval = interval.max(MIN_INTERVAL);
    let (stop_tx, stop_rx) = mpsc::channel::<()>();
    let spawned = thread::Builder::new()
        .name("gpu-sampler".to_string())
        .spawn(move || {
            let mut sink = sink;
            // The probe is opened on this thread so the NVML handle never leaves it.
            let mut probe = Probe::open(&source);
            let mut next = Instant::now();
            let mut clock = TickClock::new(next);
            loop {
                let mut snapshot = probe.sample(&*ours);
                snapshot.at_ms = clock.stamp(next, snapshot.at_ms);
                if !sink(snapshot) {
                    break;
                }
                next += interval;
                let now = Instant::now();
                if next < now {
                    // A slow driver call overran the interval: skip, don't burst.
                    next = now;
                }
                match stop_rx.recv_timeout(next - now) {
                    Err(RecvTimeoutError::Timeout) => {}
                    Ok(()) | Err(RecvTimeoutError::Disconnected) => break,
                }
            }
        });
    match spawned {
        Ok(thread) => Sampler {
            stop: Some(stop_tx),
            thread: Some(thread),
            spawn_error: None,
        },
        Err(err) => Sampler {
            stop: None,
            thread: None,
            spawn_error: Some(err.to_string()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_stamped_on_their_schedule_and_follow_a_stepped_wall_clock() {
        let t0 = Instant::now();
        let mut clock = TickClock {
            anchor: t0,
            anchor_ms: 10_000,
        };
        let tick = |ms| t0 + Duration::from_millis(ms);
        // Read late by a slow driver call: stamped at the tick anyway.
        assert_eq!(clock.stamp(tick(250), 10_400), 10_250);
        assert_eq!(clock.stamp(tick(500), 10_505), 10_500);
        // The wall clock stepped 5 s ahead: the stamp follows it, and the
        // ticks after it are mapped from there.
        assert_eq!(clock.stamp(tick(750), 15_760), 15_760);
        assert_eq!(clock.stamp(tick(1000), 16_100), 16_010);
    }
}
