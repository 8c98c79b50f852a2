//! Which failed exports are worth another try, and when: the OTLP
//! specification's "Failures" rules, as `opentelemetry-otlp` applies them.
//!
//! - Retried: no answer at all (a collector restarting refuses the
//!   connection), gRPC `UNAVAILABLE`, `CANCELLED`, `DEADLINE_EXCEEDED`,
//!   `ABORTED`, `OUT_OF_RANGE`, `DATA_LOSS`, `RESOURCE_EXHAUSTED` only with
//!   a `RetryInfo`; HTTP 429, 502, 503, 504.
//! - A collector's `RetryInfo` or `Retry-After` (seconds or an HTTP date)
//!   sets the wait (at most 30 s); otherwise 100 ms, doubling up to 1.6 s,
//!   plus up to 100 ms of jitter; at most three retries.
//! - All of it within the export's timeout (`OTEL_EXPORTER_OTLP_TIMEOUT`):
//!   a retry whose wait would pass it is not made. An export that timed
//!   out has spent the budget and is not retried.

use std::time::Duration;

use super::failure::ExportFailure;
use crate::backoff::{Backoff, Jitter};

const MAX_RETRIES: u32 = 3;
const INITIAL_DELAY: Duration = Duration::from_millis(100);
const MAX_DELAY: Duration = Duration::from_millis(1_600);
const MAX_THROTTLE: Duration = Duration::from_secs(30);
/// Up to 100 ms more, so that replicas that failed together do not retry
/// together.
const JITTER: Jitter = Jitter::Up(Duration::from_millis(100));

/// Whether `failure` may be retried and, if the collector said, after how
/// long.
fn retryable(failure: &ExportFailure) -> Option<Option<Duration>> {
    use tonic::Code;
    match failure {
        ExportFailure::Timeout(_) => None,
        ExportFailure::Transport(_) => Some(None),
        ExportFailure::Grpc { code, retry_after } => match code {
            Code::Unavailable => Some(*retry_after),
            Code::ResourceExhausted => retry_after.map(Some),
            Code::Cancelled
            | Code::DeadlineExceeded
            | Code::Aborted
            | Code::OutOfRange
            | Code::DataLoss => Some(None),
            _ => None,
        },
        ExportFailure::Http {
            status,
            retry_after,
        } => match status {
            429 | 503 => Some(*retry_after),
            502 | 504 => Some(None),
            _ => None,
        },
    }
}

/// The retries of one export: whether each failure is worth another
/// attempt, and the wait before it.
#[derive(Debug)]
pub(super) struct ExportRetries {
    retries: u32,
    backoff: Backoff,
}

impl ExportRetries {
    /// Before the first attempt.
    pub(super) fn new() -> Self {
        Self::with_jitter(JITTER)
    }

    fn with_jitter(jitter: Jitter) -> Self {
        Self {
            retries: 0,
            backoff: Backoff::new(INITIAL_DELAY, MAX_DELAY).jittered(jitter),
        }
    }

    /// How long to wait before retrying after `failure`; `None`: give up.
    pub(super) fn next(&mut self, failure: &ExportFailure) -> Option<Duration> {
        let server = retryable(failure)?;
        if self.retries >= MAX_RETRIES {
            return None;
        }
        self.retries += 1;
        if let Some(server) = server.map(|d| d.min(MAX_THROTTLE)) {
            // The collector's wait may exceed the usual cap; it is never
            // shortened.
            self.backoff.at_least(server, MAX_THROTTLE);
        }
        Some(self.backoff.next_delay())
    }
}

/// `Retry-After`, in seconds or as an HTTP date (RFC 9110, section
/// 10.2.3), capped at [`MAX_THROTTLE`].
pub(super) fn retry_after_header(value: Option<&http::HeaderValue>) -> Option<Duration> {
    retry_after_at(value?.to_str().ok()?, std::time::SystemTime::now())
}

/// `Retry-After`'s wait as of `now`: a date already past is no wait.
fn retry_after_at(value: &str, now: std::time::SystemTime) -> Option<Duration> {
    let value = value.trim();
    let wait = match value.parse::<u64>() {
        Ok(seconds) => Duration::from_secs(seconds),
        // IMF-fixdate, the form servers send (`Sun, 06 Nov 1994 08:49:37
        // GMT`), is RFC 2822's syntax.
        Err(_) => {
            let at =
                time::OffsetDateTime::parse(value, &time::format_description::well_known::Rfc2822)
                    .ok()?;
            std::time::SystemTime::from(at)
                .duration_since(now)
                .unwrap_or(Duration::ZERO)
        }
    };
    Some(wait.min(MAX_THROTTLE))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unjittered() -> ExportRetries {
        ExportRetries::with_jitter(Jitter::None)
    }

    fn grpc(code: tonic::Code, retry_after: Option<Duration>) -> ExportFailure {
        ExportFailure::Grpc { code, retry_after }
    }

    fn http(status: u16, retry_after: Option<Duration>) -> ExportFailure {
        ExportFailure::Http {
            status,
            retry_after,
        }
    }

    #[test]
    fn transient_failures_back_off_from_100_ms_doubling_three_times_at_most() {
        let mut retries = unjittered();
        let unavailable = grpc(tonic::Code::Unavailable, None);
        let waits: Vec<_> = std::iter::from_fn(|| retries.next(&unavailable)).collect();
        assert_eq!(
            waits,
            [100, 200, 400].map(Duration::from_millis),
            "three retries, then give up"
        );
    }

    #[test]
    fn the_specification_says_which_failures_are_retried() {
        for failure in [
            ExportFailure::Transport("connection refused".into()),
            grpc(tonic::Code::Unavailable, None),
            grpc(tonic::Code::DeadlineExceeded, None),
            grpc(tonic::Code::Aborted, None),
            grpc(tonic::Code::ResourceExhausted, Some(Duration::from_secs(1))),
            http(429, None),
            http(502, None),
            http(503, None),
            http(504, None),
        ] {
            assert!(unjittered().next(&failure).is_some(), "{failure:?}");
        }
        for failure in [
            ExportFailure::Timeout(Duration::from_secs(10)),
            grpc(tonic::Code::ResourceExhausted, None),
            grpc(tonic::Code::Unauthenticated, None),
            grpc(tonic::Code::InvalidArgument, None),
            grpc(tonic::Code::Internal, None),
            http(400, None),
            http(401, None),
            http(413, None),
            http(500, None),
        ] {
            assert!(unjittered().next(&failure).is_none(), "{failure:?}");
        }
    }

    #[test]
    fn a_collectors_retry_delay_is_honoured_up_to_30_seconds_never_shortened() {
        let mut retries = unjittered();
        assert_eq!(
            retries.next(&http(503, Some(Duration::from_secs(5)))),
            Some(Duration::from_secs(5))
        );
        assert_eq!(
            retries.next(&http(503, Some(Duration::from_millis(10)))),
            Some(Duration::from_secs(10)),
            "the doubled wait, not the shorter one asked"
        );
        let mut retries = unjittered();
        assert_eq!(
            retries.next(&grpc(
                tonic::Code::Unavailable,
                Some(Duration::from_secs(600))
            )),
            Some(MAX_THROTTLE)
        );
    }

    #[test]
    fn jitter_stays_within_100_ms() {
        for _ in 0..100 {
            let wait = ExportRetries::new()
                .next(&grpc(tonic::Code::Unavailable, None))
                .expect("retried");
            assert!((INITIAL_DELAY..=INITIAL_DELAY + Duration::from_millis(100)).contains(&wait));
        }
    }

    #[test]
    fn retry_after_is_read_in_seconds_and_capped() {
        let value = |v: &'static str| http::HeaderValue::from_static(v);
        assert_eq!(
            retry_after_header(Some(&value("7"))),
            Some(Duration::from_secs(7))
        );
        assert_eq!(
            retry_after_header(Some(&value("86400"))),
            Some(MAX_THROTTLE)
        );
        assert_eq!(retry_after_header(None), None);
        assert_eq!(retry_after_header(Some(&value("soon"))), None);
    }

    #[test]
    fn retry_after_as_an_http_date_waits_until_then_and_a_past_date_not_at_all() {
        let now = std::time::SystemTime::from(time::macros::datetime!(1999-12-31 23:59:52 UTC));
        assert_eq!(
            retry_after_at("Fri, 31 Dec 1999 23:59:59 GMT", now),
            Some(Duration::from_secs(7))
        );
        assert_eq!(
            retry_after_at("Fri, 31 Dec 1999 23:00:00 GMT", now),
            Some(Duration::ZERO)
        );
        assert_eq!(
            retry_after_at("Sat, 01 Jan 2000 23:59:59 GMT", now),
            Some(MAX_THROTTLE)
        );
        assert_eq!(retry_after_at("31 Dec 1999 23:59:59", now), None);
    }
}
