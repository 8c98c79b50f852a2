use std::time::Duration;

use super::*;
use crate::{channels::transport::SessionGrant, domain::SessionToken, upstream::UpstreamError};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn quantiles_interpolate_inside_buckets() {
    let mut h = LatencyHistogram::default();
    assert_eq!(h.quantile(0.5), None);
    for _ in 0..100 {
        h.observe(ms(600)); // (500, 1000]
    }
    let p50 = h.quantile(0.5).unwrap();
    assert!(p50 > ms(500) && p50 <= ms(1_000), "{p50:?}");
    h.observe(Duration::from_secs(120));
    assert_eq!(h.quantile(1.0), Some(ms(60_000)));
    assert_eq!(LatencyHistogram::from_counts(h.counts()), Some(h));
    assert_eq!(LatencyHistogram::from_counts(&[1, 2]), None);
}

#[test]
fn the_wilson_interval_brackets_the_rate() {
    let t = ChannelFigures {
        valid: 90,
        invalid: 8,
        blocked: 2,
        ..ChannelFigures::default()
    };
    let (p, lo, hi) = t.pass_rate().unwrap();
    assert!((p - 0.9).abs() < 1e-9);
    assert!(
        (lo - 0.8256).abs() < 1e-3 && (hi - 0.9448).abs() < 1e-3,
        "{lo} {hi}"
    );
    let all = ChannelFigures {
        valid: 5,
        ..ChannelFigures::default()
    };
    let (_, lo, hi) = all.pass_rate().unwrap();
    assert!(lo > 0.5 && hi == 1.0, "{lo} {hi}");
    assert_eq!(ChannelFigures::default().pass_rate(), None);
}

#[test]
fn buckets_age_out_after_the_retention_and_windows_sum_minutes() {
    let f = Figures::new(3);
    let grant = |t: &mut ChannelFigures| t.sessions_started += 1;
    for minute in [100, 100, 101, 102] {
        f.update("primary", minute, grant);
    }
    assert_eq!(f.window_at(102, 1)["primary"].sessions_started, 1);
    assert_eq!(f.window_at(102, 3)["primary"].sessions_started, 4);
    f.update("primary", 103, grant);
    // Minute 100 is gone: at most 3 buckets are kept.
    assert_eq!(f.window_at(103, 10)["primary"].sessions_started, 3);
    assert_eq!(lock(&f.channels)["primary"].len(), 3);
}

#[test]
fn a_minute_of_one_channel_costs_about_0_4_kb() {
    // The documented memory bound: retention x channels x this.
    assert!(std::mem::size_of::<(u64, ChannelFigures)>() <= 432);
}

#[test]
fn channels_beyond_the_cap_evict_the_stalest() {
    let f = Figures::new(10);
    for i in 0..=MAX_FIGURE_CHANNELS {
        f.update(&format!("c{i}"), i as u64, |t| t.valid += 1);
    }
    let w = f.window_at(MAX_FIGURE_CHANNELS as u64, 10);
    assert_eq!(lock(&f.channels).len(), MAX_FIGURE_CHANNELS);
    assert!(!lock(&f.channels).contains_key("c0"));
    assert!(w.contains_key(&format!("c{MAX_FIGURE_CHANNELS}")));
}

#[test]
fn outcomes_and_errors_are_counted_by_class() {
    let f = Figures::default();
    let op = Operation::Liveness3D;
    let invalid = CallOutcome {
        op,
        ended: Ended::Verdict(Verdict::Invalid),
        elapsed: ms(3),
    };
    f.record("alt", &invalid);
    let timeout = Err(UpstreamError::Timeout { op });
    f.record("alt", &CallOutcome::verification(&timeout, ms(7)));
    let grant = Ok(SessionGrant {
        token: SessionToken::new("t"),
        vendor: "v".to_owned(),
        vendor_url: String::new(),
        contingency: true,
    });
    f.record("alt", &CallOutcome::session(&grant, ms(1)));
    let unavailable = Err(UpstreamError::Status {
        op: Operation::SessionToken3D,
        status: 503,
    });
    f.record("alt", &CallOutcome::session(&unavailable, ms(1)));
    // Never sent: not the vendor's doing.
    let refused = Err(UpstreamError::Saturated { op });
    f.record("alt", &CallOutcome::verification(&refused, ms(0)));
    f.record("alt", &CallOutcome::circuit_open());
    let t = f.window(60)["alt"];
    assert_eq!((t.invalid, t.verifications(), t.verdicts()), (1, 2, 1));
    assert_eq!(
        t.verification_errors.classes().collect::<Vec<_>>(),
        [("timeout", 1)]
    );
    assert_eq!(
        t.session_errors.classes().collect::<Vec<_>>(),
        [("http_5xx", 1)]
    );
    assert_eq!(t.contingency_rate(), Some(1.0));
    assert_eq!(t.error_rate(), Some(0.5));
    assert_eq!(t.liveness_latency.count(), 2);
    let mut e = ErrorCounts::default();
    e.add("from-a-newer-replica", 2);
    assert_eq!(e.classes().collect::<Vec<_>>(), [("other", 2)]);
}
