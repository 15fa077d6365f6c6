//! The plan's `[limits]` table, checked: context limit and margin, timeouts,
//! and the thresholds that flag a cell.

use toml::Spanned;

use super::located::{seconds, within, Ctx};
use super::schema::RawPlan;
use super::{
    ranges, ContextLimit, Limits, PlanError, DEFAULT_LOG_MAX_MB, DEFAULT_MAX_COLD_CACHE_HIT_PCT,
    DEFAULT_MAX_SPREAD_PCT, DEFAULT_MAX_TTFT_GAP_MS,
};

pub(super) fn limits(ctx: &Ctx, raw: &RawPlan) -> Result<Limits, PlanError> {
    let l = &raw.limits;
    let context = match &l.context {
        None => ContextLimit::Server,
        Some(v) => match v.get_ref() {
            toml::Value::Integer(n) if *n > 0 => ContextLimit::Tokens(*n as u64),
            toml::Value::String(s) if s == "server" => ContextLimit::Server,
            _ => {
                return Err(ctx.err(
                    v.span(),
                    "limits.context must be a positive number of tokens or \"server\"",
                ))
            }
        },
    };
    if let ContextLimit::Tokens(n) = context {
        if let Some(v) = &l.context {
            if n > ranges::TOKENS.1 {
                return Err(ctx.err(
                    v.span(),
                    format!("limits.context must be at most {} tokens", ranges::TOKENS.1),
                ));
            }
        }
    }
    let max_error_rate = threshold(
        ctx,
        l.max_error_rate.as_ref(),
        0.0,
        |x| (0.0..=1.0).contains(&x),
        "limits.max_error_rate must be from 0 to 1",
    )?;
    let max_ttft_gap_ms = threshold(
        ctx,
        l.max_ttft_gap_ms.as_ref(),
        DEFAULT_MAX_TTFT_GAP_MS,
        |x| x.is_finite() && x > 0.0,
        "limits.max_ttft_gap_ms must be a number of milliseconds above 0",
    )?;
    let max_cold_cache_hit_pct = threshold(
        ctx,
        l.max_cold_cache_hit_pct.as_ref(),
        DEFAULT_MAX_COLD_CACHE_HIT_PCT,
        |x| (0.0..=100.0).contains(&x),
        "limits.max_cold_cache_hit_pct must be from 0 to 100",
    )?;
    let max_spread_pct = threshold(
        ctx,
        l.max_spread_pct.as_ref(),
        DEFAULT_MAX_SPREAD_PCT,
        |x| x.is_finite() && x >= 0.0,
        "limits.max_spread_pct must be a percentage of 0 or more",
    )?;
    let context_margin = match &l.context_margin {
        None => 16,
        Some(v) => within(ctx, v, ranges::CONTEXT_MARGIN, "limits.context_margin")?,
    };
    Ok(Limits {
        context,
        context_margin,
        request_timeout_s: seconds(
            ctx,
            l.request_timeout_s.as_ref(),
            600.0,
            "limits.request_timeout_s",
        )?,
        stall_timeout_s: seconds(
            ctx,
            l.stall_timeout_s.as_ref(),
            120.0,
            "limits.stall_timeout_s",
        )?,
        cell_timeout_s: seconds(
            ctx,
            l.cell_timeout_s.as_ref(),
            3600.0,
            "limits.cell_timeout_s",
        )?,
        max_error_rate,
        short_requests: l.short_requests,
        max_ttft_gap_ms,
        max_cold_cache_hit_pct,
        max_spread_pct,
        foreign_gpu: l.foreign_gpu,
        log_max_mb: match &l.log_max_mb {
            None => DEFAULT_LOG_MAX_MB,
            Some(v) => within(ctx, v, (0, 1 << 20), "limits.log_max_mb")?,
        },
    })
}

/// A threshold the plan may set: its value when `ok` holds for it, `default`
/// when not given; otherwise `message`, pointing at the value.
fn threshold(
    ctx: &Ctx,
    v: Option<&Spanned<f64>>,
    default: f64,
    ok: impl Fn(f64) -> bool,
    message: &str,
) -> Result<f64, PlanError> {
    match v {
        None => Ok(default),
        Some(v) if ok(*v.get_ref()) => Ok(*v.get_ref()),
        Some(v) => Err(ctx.err(v.span(), message)),
    }
}
