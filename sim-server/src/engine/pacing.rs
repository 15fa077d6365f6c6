//! The pacing model: when each token of a request is due, from the flags
//! (fixed TTFT/ITL, or a model of TP, speculative acceptance and load).

use std::time::{Duration, Instant};

use super::{Rng, MAX_POSITIONS};
use crate::args::{Method, SimArgs};

/// The pacing model derived from the flags.
#[derive(Debug, Clone)]
pub struct Pacing {
    fixed_ttft: Option<Duration>,
    pub(super) fixed_itl: Option<Duration>,
    pub(super) max_speed: bool,
    tp: u32,
    method: Method,
    budget: u32,
}

const BASE_TTFT_MS: f64 = 15.0;
const PREFILL_MS_PER_TOKEN: f64 = 0.004;
const BASE_ITL_MS: f64 = 8.0;
const SLOWDOWN_PER_EXTRA_REQUEST: f64 = 0.08;

/// Milliseconds to a duration, clamped to [0, 1 day] (NaN counts as 0).
fn ms(x: f64) -> Duration {
    let secs = x / 1000.0;
    if secs.is_nan() || secs <= 0.0 {
        Duration::ZERO
    } else {
        Duration::from_secs_f64(secs.min(86_400.0))
    }
}

/// `t + d`, saturating at a year from `t` instead of overflowing.
pub(super) fn after(t: Instant, d: Duration) -> Instant {
    t.checked_add(d)
        .unwrap_or_else(|| t + Duration::from_secs(365 * 86_400))
}

impl Pacing {
    pub fn new(args: &SimArgs) -> Pacing {
        let fixed = |v: Option<f64>| v.filter(|x| x.is_finite()).map(ms);
        Pacing {
            fixed_ttft: fixed(args.ttft_ms),
            fixed_itl: fixed(args.itl_ms),
            max_speed: args.max_speed,
            tp: args.tp.max(1),
            method: args.method,
            budget: args.budget.max(1),
        }
    }

    fn tp_speedup(&self) -> f64 {
        match self.tp {
            1 => 1.0,
            2 => 0.65,
            4 => 0.45,
            8 => 0.3,
            n => 1.0 / f64::from(n).powf(0.58),
        }
    }

    fn slowdown(active: u64) -> f64 {
        1.0 + SLOWDOWN_PER_EXTRA_REQUEST * active.saturating_sub(1) as f64
    }

    pub fn ttft(&self, prompt_tokens: u64, active: u64) -> Duration {
        self.fixed_ttft.unwrap_or_else(|| {
            let prefill = PREFILL_MS_PER_TOKEN * prompt_tokens as f64 / f64::from(self.tp);
            ms((BASE_TTFT_MS + prefill) * Self::slowdown(active))
        })
    }

    pub fn speculative(&self) -> bool {
        self.method != Method::None
    }

    /// Draft tokens proposed per verify step.
    pub fn draft_len(&self) -> u64 {
        match self.method {
            Method::None => 0,
            Method::Dflash => 15,
            Method::Ddtree => u64::from(self.budget),
        }
    }

    /// Most tokens one verify step can deliver (all drafts plus the bonus token).
    fn max_accept(&self) -> u64 {
        self.draft_len().min(MAX_POSITIONS as u64 - 1) + 1
    }

    /// Mean tokens delivered per verify step.
    pub fn mean_accept(&self) -> f64 {
        let mean = match self.method {
            Method::None => 1.0,
            Method::Dflash => 3.1,
            Method::Ddtree => 3.4 + 0.05 * f64::from(self.budget),
        };
        mean.min(0.8 * self.max_accept() as f64).max(1.0)
    }

    /// Tokens delivered by one verify step: spread around the mean, with a mean
    /// that is exactly `mean_accept` (stochastic rounding, symmetric noise).
    pub fn draw_accept(&self, rng: &mut Rng) -> u64 {
        let mean = self.mean_accept();
        let max = self.max_accept() as f64;
        let spread = 2.0f64.min(mean - 1.0).min(max - mean).max(0.0);
        let x = mean + spread * (rng.unit() + rng.unit() - 1.0);
        let k = x.floor() + f64::from(u8::from(rng.unit() < x.fract()));
        (k.clamp(1.0, max)) as u64
    }

    /// Duration of one decode step (a verify step with a speculative method).
    pub fn step(&self, active: u64) -> Duration {
        let plain = BASE_ITL_MS * self.tp_speedup();
        let cost = match self.method {
            Method::None => 1.0,
            Method::Dflash => 1.15,
            Method::Ddtree => 1.2 + 0.004 * f64::from(self.budget),
        };
        ms(plain * cost * Self::slowdown(active))
    }
}
