//! Prepare steps while they run: what each puts in place, how far it is,
//! and the configs waiting for it (the header and the grid show them). A
//! step that ended is no longer shown here (its end is in the log pane), nor
//! one whose sweep ended or started again (a sweep killed mid-step never
//! said its end).

use super::ViewState;
use crate::model::text::display;
use crate::model::Timestamp;

/// A step that runs now.
#[derive(Debug, Clone, PartialEq)]
pub struct Preparing {
    pub step: String,
    pub started: Timestamp,
    pub bytes: u64,
    pub expect_bytes: Option<u64>,
    pub rate_bps: f64,
    pub configs: Vec<String>,
}

impl Preparing {
    /// `qwen: 31.2 GB / 52.0 GB · 410 MB/s · ETA 0:51`.
    pub fn progress(&self) -> String {
        crate::view::text::progress(
            &display(&self.step),
            self.bytes,
            self.expect_bytes,
            self.rate_bps,
        )
    }

    /// How far it is, in whole percent, when its whole is known.
    pub fn percent(&self) -> Option<u8> {
        let e = self.expect_bytes.filter(|&e| e > 0)?;
        Some((self.bytes.saturating_mul(100) / e).min(100) as u8)
    }
}

impl ViewState {
    pub(super) fn prepare_started(
        &mut self,
        at: Timestamp,
        step: &str,
        expect_bytes: Option<u64>,
        configs: &[String],
    ) {
        if self
            .preparing
            .iter()
            .any(|p| p.step == step && p.started > at)
        {
            return;
        }
        self.preparing.retain(|p| p.step != step);
        self.preparing.push(Preparing {
            step: step.to_string(),
            started: at,
            bytes: 0,
            expect_bytes,
            rate_bps: 0.0,
            configs: configs.to_vec(),
        });
    }

    pub(super) fn prepare_progress(
        &mut self,
        at: Timestamp,
        step: &str,
        bytes: u64,
        rate_bps: f64,
    ) {
        if let Some(p) = self
            .preparing
            .iter_mut()
            .find(|p| p.step == step && p.started <= at)
        {
            p.bytes = bytes;
            p.rate_bps = rate_bps;
        }
    }

    pub(super) fn prepare_ended(&mut self, at: Timestamp, step: &str) {
        self.preparing
            .retain(|p| !(p.step == step && p.started <= at));
    }

    /// The step a config waits for now, if any.
    pub fn preparing_for(&self, config: &str) -> Option<&Preparing> {
        self.preparing
            .iter()
            .find(|p| p.configs.iter().any(|c| c == config))
    }
}
