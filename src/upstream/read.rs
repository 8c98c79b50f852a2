//! Reading an answer body within a size bound.

use bytes::{Bytes, BytesMut};
use http::header::CONTENT_LENGTH;
use http_body_util::BodyExt as _;
use hyper::body::Incoming;

use super::UpstreamError;
use crate::domain::Operation;

/// Reads the body chunk by chunk, failing as soon as it would exceed
/// `limit` (or at once when its declared length does). A body that arrives
/// in one chunk is returned without a copy.
pub(super) async fn read_bounded(
    op: Operation,
    response: http::Response<Incoming>,
    limit: usize,
) -> Result<Bytes, UpstreamError> {
    let oversize = UpstreamError::Oversize { op, limit };
    let declared = response
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let mut body = response.into_body();
    if declared.is_some_and(|len| len > limit as u64) {
        return Err(oversize);
    }
    let mut first: Option<Bytes> = None;
    let mut buf: Option<BytesMut> = None;
    let mut total = 0usize;
    loop {
        let chunk = match body.frame().await {
            // Trailers carry nothing the gateway reads.
            Some(Ok(frame)) => match frame.into_data() {
                Ok(chunk) => chunk,
                Err(_) => continue,
            },
            None => break,
            Some(Err(e)) if e.is_timeout() => return Err(UpstreamError::Timeout { op }),
            Some(Err(_)) => return Err(UpstreamError::Transport { op }),
        };
        total = total.saturating_add(chunk.len());
        if total > limit {
            return Err(oversize);
        }
        match (&mut first, &mut buf) {
            (None, None) => first = Some(chunk),
            (Some(head), None) => {
                let hint = declared.map_or(total * 2, |d| d as usize).min(limit);
                let mut b = BytesMut::with_capacity(hint.max(total));
                b.extend_from_slice(head);
                b.extend_from_slice(&chunk);
                buf = Some(b);
                first = None;
            }
            (_, Some(b)) => b.extend_from_slice(&chunk),
        }
    }
    Ok(match (first, buf) {
        (_, Some(b)) => b.freeze(),
        (Some(head), None) => head,
        (None, None) => Bytes::new(),
    })
}
