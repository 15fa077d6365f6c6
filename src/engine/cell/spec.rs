//! What one cell asks for: its context target and concurrency, its
//! workload, the plan's limits; and from them what it sends and what its
//! figures are judged against.

use std::sync::Arc;
use std::time::Duration;

use crate::detect;
use crate::load::client::JsonText;
use crate::load::tags::Tags;
use crate::load::{Arrival, CellLoad};
use crate::model::{Failure, FailureKind, FailureSource};
use crate::plan::{Cache, Cell, Limits, Plan, ShortRequests, Workload};

/// What one cell asks for.
pub(crate) struct CellSpec<'a> {
    pub context_tokens: u64,
    pub concurrency: u32,
    pub workload: &'a Workload,
    pub limits: &'a Limits,
}

impl<'a> CellSpec<'a> {
    /// A plan's cell; one whose workload the plan lacks cannot run.
    pub fn of(plan: &'a Plan, cell: &Cell) -> Result<CellSpec<'a>, Failure> {
        let workload = plan.workload(&cell.workload).ok_or_else(|| {
            Failure::new(
                FailureKind::StartupFailed,
                FailureSource::Preflight,
                format!("unknown workload {}", cell.workload),
            )
        })?;
        Ok(CellSpec {
            context_tokens: cell.context_tokens,
            concurrency: cell.concurrency,
            workload,
            limits: &plan.limits,
        })
    }

    pub(super) fn cold(&self) -> bool {
        self.workload.cache == Cache::Cold
    }

    /// What the cell sends: `prompts` with `tags` (placed for its cache).
    pub(super) fn load(&self, prompts: Arc<Vec<JsonText>>, tags: Tags) -> CellLoad {
        let (w, limits) = (self.workload, self.limits);
        CellLoad {
            arrival: match w.rate {
                Some(rate) => Arrival::Poisson { rate, capped: true },
                None => Arrival::Closed,
            },
            duration: w.duration_s.map(Duration::from_secs_f64),
            concurrency: self.concurrency,
            requests: w.requests,
            warmup: w.warmup,
            max_tokens: w.max_tokens,
            prompts,
            tags,
            request_timeout: Duration::from_secs_f64(limits.request_timeout_s),
            stall_timeout: Duration::from_secs_f64(limits.stall_timeout_s),
        }
    }

    /// What its figures are judged against.
    pub(super) fn checks(
        &self,
        context_limit: Option<u64>,
        server_context: Option<u64>,
        prompt_target: Option<u64>,
    ) -> detect::Checks {
        let limits = self.limits;
        detect::Checks {
            max_tokens: self.workload.max_tokens,
            max_error_rate: limits.max_error_rate,
            fail_short: limits.short_requests == ShortRequests::Fail,
            context_limit,
            server_context,
            max_ttft_gap_ms: limits.max_ttft_gap_ms,
            max_cold_cache_hit_pct: self.cold().then_some(limits.max_cold_cache_hit_pct),
            prompt_target,
        }
    }
}
