use std::time::Duration;

use super::lines::decode_stats_lines;
use super::*;

#[test]
fn accept_draws_have_the_configured_mean() {
    for (flags, mean) in [
        (vec!["--method", "dflash"], 3.1),
        (vec!["--method", "ddtree", "--budget", "16"], 4.2),
    ] {
        let pacing = Pacing::new(&SimArgs::for_tests(&flags));
        let mut rng = Rng::new(42);
        let n = 200_000;
        let total: u64 = (0..n).map(|_| pacing.draw_accept(&mut rng)).sum();
        let got = total as f64 / n as f64;
        assert!((got - mean).abs() < 0.02, "{flags:?}: {got} vs {mean}");
    }
}

#[test]
fn pacing_model_scales() {
    let p = Pacing::new(&SimArgs::for_tests(&[]));
    assert_eq!(p.ttft(0, 1), Duration::from_millis(15));
    assert!(p.ttft(10_000, 1) > p.ttft(0, 1));
    assert!(p.step(8) > p.step(1));
    let tp8 = Pacing::new(&SimArgs::for_tests(&["--tp", "8"]));
    assert!(tp8.step(1) < p.step(1));
    let fixed = Pacing::new(&SimArgs::for_tests(&["--ttft-ms", "200", "--itl-ms", "10"]));
    assert_eq!(fixed.ttft(30_000, 64), Duration::from_millis(200));
    assert_eq!(fixed.fixed_itl, Some(Duration::from_millis(10)));
}

#[test]
fn decode_stats_lines_in_each_flavor() {
    let shared = Shared::for_tests(&["--method", "dflash"]);
    let mut c = Counters {
        active: 2,
        active_kv_tokens: 1234,
        ..Counters::default()
    };
    c.interval.output_tokens = 300;
    c.interval.spec.steps = 10;
    c.interval.spec.accepted = 25;
    c.interval.spec.draft_tokens = 150;
    let lines = decode_stats_lines(&shared, &c, &c.interval, 2.0);
    assert_eq!(
        lines[0].text,
        "Decode batch. #running-req: 2, #token: 1234, token usage: 0.00, accept len: 3.50, \
         cuda graph: True, gen throughput (token/s): 150.00, #queue-req: 0"
    );
    let shared = Shared::for_tests(&["--method", "dflash", "--flavor", "vllm"]);
    let lines = decode_stats_lines(&shared, &c, &c.interval, 2.0);
    assert!(lines[0].text.starts_with(
        "Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 150.0 tokens/s, \
         Running: 2 reqs"
    ));
    assert_eq!(lines[0].source, "metrics.py:455");
    assert!(
        lines[1].text.starts_with(
            "SpecDecoding metrics: Mean acceptance length: 3.50, Accepted throughput: 12.50 \
         tokens/s, Drafted throughput: 75.00 tokens/s, Accepted: 25 tokens, Drafted: 150 tokens"
        ),
        "{}",
        lines[1].text
    );
    let plain = Shared::for_tests(&[]);
    let lines = decode_stats_lines(&plain, &c, &c.interval, 2.0);
    assert!(!lines[0].text.contains("accept len"));
}

#[test]
fn reserve_stops_at_the_fault_threshold() {
    let shared = Shared::for_tests(&["--fault", "hang@10"]);
    assert_eq!(shared.reserve(4, None), (4, None));
    assert_eq!(shared.reserve(4, Some(15)), (4, None));
    assert_eq!(shared.reserve(4, Some(15)), (2, Some(TokenFault::Hang)));
    assert_eq!(shared.reserve(4, None), (0, None));
    let c = shared.counters();
    assert_eq!(c.output_tokens, 10);
    assert_eq!(c.spec.steps, 2);
    assert_eq!(c.spec.accepted, 3 + 1);
    assert_eq!(c.spec.draft_tokens, 30);
}
