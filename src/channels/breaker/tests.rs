use super::*;

const FAULT: Health = Health::Fault { answered: true };
const UNANSWERED: Health = Health::Fault { answered: false };

fn config() -> BreakerConfig {
    BreakerConfig {
        failure_rate_percent: 50,
        minimum_calls: 10,
        window_secs: 10,
        failure_threshold: 3,
        base_ejection_ms: 1000,
        max_ejection_ms: 8000,
        half_open_trials: 2,
    }
}

fn call(b: &Breaker, health: Health, now: Instant) {
    b.try_acquire(now).expect("permit").report(health, now);
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Opens the breaker at `t` by the fast path.
fn open(b: &Breaker, t: Instant) {
    for _ in 0..b.config().failure_threshold {
        call(b, UNANSWERED, t);
    }
    assert_eq!(b.snapshot(t).state, CircuitState::Open);
}

#[tokio::test(start_paused = true)]
async fn a_channel_failing_one_call_in_ten_stays_closed_whatever_the_runs() {
    let b = Breaker::new(config());
    let t = Instant::now();
    // Five faults in a row (as many callers in flight see a hiccup at
    // once), then forty-five answers, over and over: one call in ten fails,
    // in runs longer than the old consecutive threshold.
    for round in 0..50u64 {
        let now = t + ms(100 * round);
        for _ in 0..5 {
            call(&b, FAULT, now);
        }
        for _ in 0..45 {
            call(&b, Health::Answered, now);
        }
    }
    let s = b.snapshot(t + ms(5000));
    assert_eq!(s.state, CircuitState::Closed);
    assert_eq!(s.times_opened, 0);
}

#[tokio::test(start_paused = true)]
async fn opens_when_the_window_failure_rate_reaches_the_threshold_with_enough_calls() {
    let b = Breaker::new(config());
    let t = Instant::now();
    for _ in 0..4 {
        call(&b, FAULT, t);
        call(&b, Health::Answered, t);
    }
    // 4 of 8: the rate is 50 %, but the window holds fewer than 10 calls.
    assert_eq!(b.snapshot(t).state, CircuitState::Closed);
    call(&b, Health::Answered, t);
    call(&b, FAULT, t);
    // 5 of 10.
    let s = b.snapshot(t);
    assert_eq!(s.state, CircuitState::Open);
    assert_eq!((s.window_calls, s.window_failures), (10, 5));
    assert_eq!(b.try_acquire(t).unwrap_err(), Rejected);
}

#[tokio::test(start_paused = true)]
async fn failures_older_than_the_window_no_longer_count() {
    let b = Breaker::new(config());
    let t = Instant::now();
    for _ in 0..9 {
        call(&b, FAULT, t);
    }
    // Ten seconds later the window starts afresh.
    let later = t + Duration::from_secs(10);
    call(&b, FAULT, later);
    let s = b.snapshot(later);
    assert_eq!(s.state, CircuitState::Closed);
    assert_eq!((s.window_calls, s.window_failures), (1, 1));
}

#[tokio::test(start_paused = true)]
async fn a_channel_that_answers_nothing_opens_on_the_fast_path() {
    let b = Breaker::new(config());
    let t = Instant::now();
    call(&b, UNANSWERED, t);
    call(&b, UNANSWERED, t);
    // An answer, even a 5xx, ends the run of unanswered calls.
    call(&b, FAULT, t);
    call(&b, UNANSWERED, t);
    call(&b, UNANSWERED, t);
    assert_eq!(b.snapshot(t).state, CircuitState::Closed);
    call(&b, UNANSWERED, t);
    assert_eq!(b.snapshot(t).state, CircuitState::Open);
}

#[tokio::test(start_paused = true)]
async fn half_open_lets_several_trials_through_and_the_first_success_closes() {
    let b = Breaker::new(config());
    let t = Instant::now();
    open(&b, t);
    assert!(b.try_acquire(t + ms(999)).is_err());
    let at = t + ms(1000);
    let first = b.try_acquire(at).expect("a trial");
    let second = b.try_acquire(at).expect("a second trial at once");
    assert!(first.is_trial() && second.is_trial());
    assert!(b.try_acquire(at).is_err(), "at most half_open_trials");
    assert_eq!(b.snapshot(at).state, CircuitState::HalfOpen);
    second.report(Health::Answered, at);
    let s = b.snapshot(at);
    assert_eq!(s.state, CircuitState::Closed);
    assert_eq!((s.consecutive_failures, s.ejections), (0, 0));
    // The slower trial's failure cannot reopen a closed circuit.
    first.report(UNANSWERED, at);
    assert_eq!(b.snapshot(at).state, CircuitState::Closed);
    assert!(!b.try_acquire(at).unwrap().is_trial());
}

#[tokio::test(start_paused = true)]
async fn the_open_time_doubles_per_failed_trial_up_to_its_cap_and_resets_on_success() {
    let b = Breaker::new(BreakerConfig {
        max_ejection_ms: 3000,
        ..config()
    });
    let mut t = Instant::now();
    open(&b, t);
    let mut open_ms = 1000;
    for expected in [2000u64, 3000, 3000] {
        t += ms(open_ms);
        call(&b, FAULT, t);
        assert!(b.try_acquire(t + ms(expected - 1)).is_err());
        assert_eq!(b.snapshot(t + ms(expected)).state, CircuitState::HalfOpen);
        open_ms = expected;
    }
    assert_eq!(b.snapshot(t).ejections, 4);
    t += ms(open_ms);
    call(&b, Health::Answered, t);
    open(&b, t);
    assert!(
        b.try_acquire(t + ms(1000)).is_ok(),
        "the first open time again"
    );
}

#[tokio::test(start_paused = true)]
async fn a_dropped_trial_frees_its_slot() {
    let b = Breaker::new(BreakerConfig {
        half_open_trials: 1,
        ..config()
    });
    let t = Instant::now();
    open(&b, t);
    let at = t + ms(1000);
    drop(b.try_acquire(at).unwrap());
    assert!(b.try_acquire(at).unwrap().is_trial());
}

#[tokio::test(start_paused = true)]
async fn a_panic_call_closes_on_success_and_never_grows_the_open_time() {
    let b = Breaker::new(config());
    let t = Instant::now();
    open(&b, t);
    assert_eq!(b.open_since(), Some(t));
    b.panic_acquire().report(UNANSWERED, t);
    let s = b.snapshot(t);
    assert_eq!((s.state, s.ejections), (CircuitState::Open, 1));
    assert!(b.try_acquire(t + ms(1000)).is_ok(), "the open time stands");
    let b = Breaker::new(config());
    open(&b, t);
    b.panic_acquire().report(Health::Answered, t);
    assert_eq!(b.snapshot(t).state, CircuitState::Closed);
    assert_eq!(b.open_since(), None);
}

#[tokio::test(start_paused = true)]
async fn ungated_outcomes_open_but_never_close() {
    let b = Breaker::new(config());
    let t = Instant::now();
    for _ in 0..3 {
        b.record(UNANSWERED, t);
    }
    assert_eq!(b.snapshot(t).state, CircuitState::Open);
    b.record(Health::Answered, t);
    assert_eq!(b.snapshot(t).state, CircuitState::Open);
}

#[test]
fn every_key_is_bounded_and_the_error_names_it() {
    assert!(BreakerConfig::default().validate().is_ok());
    let cases: [(BreakerConfig, &str); 7] = [
        (
            BreakerConfig {
                failure_rate_percent: 0,
                ..config()
            },
            "failure_rate_percent",
        ),
        (
            BreakerConfig {
                failure_rate_percent: 101,
                ..config()
            },
            "failure_rate_percent",
        ),
        (
            BreakerConfig {
                minimum_calls: 0,
                ..config()
            },
            "minimum_calls",
        ),
        (
            BreakerConfig {
                window_secs: 301,
                ..config()
            },
            "window_secs",
        ),
        (
            BreakerConfig {
                failure_threshold: 0,
                ..config()
            },
            "failure_threshold",
        ),
        (
            BreakerConfig {
                max_ejection_ms: 999,
                ..config()
            },
            "max_ejection_ms",
        ),
        (
            BreakerConfig {
                half_open_trials: 0,
                ..config()
            },
            "half_open_trials",
        ),
    ];
    for (bad, key) in cases {
        let err = bad.validate().unwrap_err();
        assert!(err.contains(key), "{err}");
    }
}
