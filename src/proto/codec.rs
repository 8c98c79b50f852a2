//! The protobuf codec of every generated service and client: prost's,
//! except that a message that does not decode is the caller's fault.
//!
//! tonic's prost codec answers undecodable bytes (random bytes, a
//! truncated varint, invalid UTF-8 in a string) with `INTERNAL`, which
//! blames the server and lets any client fire error-ratio alerts. Here it
//! is `INVALID_ARGUMENT` with the `ErrorInfo` reason `MALFORMED_REQUEST`,
//! and a message that names the expected type, never the bytes.

use std::marker::PhantomData;

use prost::Message;
use tonic::{
    Code, Status,
    codec::{BufferSettings, Codec, DecodeBuf, Decoder},
};
use tonic_prost::{ProstCodec, ProstDecoder, ProstEncoder};
use tonic_types::{ErrorDetails, StatusExt};

/// `ErrorInfo.domain` of the API's errors.
pub const ERROR_DOMAIN: &str = "idgate";

/// `ErrorInfo.reason` of a message that does not decode.
pub const MALFORMED_REQUEST: &str = "MALFORMED_REQUEST";

/// prost's codec with caller-fault decode errors.
#[derive(Debug, Clone)]
pub struct GatewayCodec<T, U> {
    _pd: PhantomData<(T, U)>,
}

impl<T, U> Default for GatewayCodec<T, U> {
    fn default() -> Self {
        Self { _pd: PhantomData }
    }
}

impl<T, U> Codec for GatewayCodec<T, U>
where
    T: Message + Send + 'static,
    U: Message + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = ProstEncoder<T>;
    type Decoder = GatewayDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        ProstCodec::<T, U>::raw_encoder(BufferSettings::default())
    }

    fn decoder(&mut self) -> Self::Decoder {
        GatewayDecoder {
            inner: ProstCodec::<T, U>::raw_decoder(BufferSettings::default()),
        }
    }
}

/// prost's decoder, its failures mapped to [`malformed`].
#[derive(Debug)]
pub struct GatewayDecoder<U> {
    inner: ProstDecoder<U>,
}

impl<U: Message + Default> Decoder for GatewayDecoder<U> {
    type Item = U;
    type Error = Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<U>, Status> {
        self.inner.decode(buf).map_err(|_| malformed::<U>())
    }

    fn buffer_settings(&self) -> BufferSettings {
        self.inner.buffer_settings()
    }
}

/// `INVALID_ARGUMENT` / `MALFORMED_REQUEST` for a message that is not a
/// valid `U`.
fn malformed<U>() -> Status {
    let type_name = std::any::type_name::<U>();
    let short = type_name.rsplit("::").next().unwrap_or(type_name);
    let mut details = ErrorDetails::new();
    details.set_error_info(
        MALFORMED_REQUEST,
        ERROR_DOMAIN,
        std::collections::HashMap::new(),
    );
    Status::with_error_details(
        Code::InvalidArgument,
        format!("the message is not a valid protobuf {short}"),
        details,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::v1;

    #[test]
    fn a_malformed_message_names_its_type_and_blames_the_caller() {
        let status = malformed::<v1::CreateJourneyRequest>();
        assert_eq!(status.code(), Code::InvalidArgument);
        assert_eq!(
            status.message(),
            "the message is not a valid protobuf CreateJourneyRequest"
        );
        let info = status.get_details_error_info().expect("ErrorInfo");
        assert_eq!(info.reason, MALFORMED_REQUEST);
        assert_eq!(info.domain, ERROR_DOMAIN);
    }
}
