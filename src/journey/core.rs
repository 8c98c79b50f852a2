//! The journey's operations on the core REST service: appkeys, 2D
//! liveness, documents and the result, over domain types (3D liveness
//! goes through the channel router).

use std::time::Duration;

use time::OffsetDateTime;

use super::credentials::Credentials;
use crate::{
    context::CallContext,
    domain::{Appkey, EndUser, ImagePayload, JourneyRef, Snapshot},
    error::Error,
    proto::v1,
    upstream::UpstreamClient,
};

/// A journey just created.
#[derive(Debug)]
pub struct NewJourney {
    /// The appkey: a bearer secret, returned to the caller only.
    pub appkey: Appkey,
    /// Its non-secret reference.
    pub journey_ref: JourneyRef,
    /// When the appkey stops being accepted (estimate from configuration).
    pub expires_at: OffsetDateTime,
}

/// The operations of a journey that go to the core REST service (3D
/// liveness goes through the channel router).
#[derive(Clone)]
pub struct JourneyCore {
    upstream: UpstreamClient,
    credentials: Credentials,
    appkey_ttl: Duration,
}

impl JourneyCore {
    /// A core over `upstream` and the operator `credentials`.
    pub fn new(upstream: UpstreamClient, credentials: Credentials, appkey_ttl: Duration) -> Self {
        Self {
            upstream,
            credentials,
            appkey_ttl,
        }
    }

    /// The REST client (shared connection pool).
    pub fn upstream(&self) -> &UpstreamClient {
        &self.upstream
    }

    /// The operator credential cache.
    pub fn credentials(&self) -> &Credentials {
        &self.credentials
    }

    /// Creates an appkey for `user` with the credentials of `profile`.
    pub async fn create_journey(
        &self,
        ctx: &CallContext,
        user: &EndUser,
        profile: &str,
    ) -> Result<NewJourney, Error> {
        let appkey = self.credentials.create_appkey(ctx, profile, user).await?;
        let journey_ref = JourneyRef::from_appkey(&appkey);
        Ok(NewJourney {
            appkey,
            journey_ref,
            expires_at: OffsetDateTime::now_utc() + self.appkey_ttl,
        })
    }

    /// Reads the journey result.
    pub async fn journey_result(
        &self,
        ctx: &CallContext,
        appkey: &Appkey,
    ) -> Result<v1::JourneyResult, Error> {
        Ok(self.upstream.journey_result(ctx, appkey).await?)
    }

    /// Generates 2D challenges.
    pub async fn create_challenges(
        &self,
        ctx: &CallContext,
        appkey: &Appkey,
    ) -> Result<v1::CreateChallengesResponse, Error> {
        Ok(self.upstream.challenge(ctx, appkey).await?)
    }

    /// Submits the 2D snapshots; sent at most once.
    pub async fn submit_challenge_response(
        &self,
        ctx: &CallContext,
        appkey: &Appkey,
        challenge_key: &str,
        snapshots: &[Snapshot],
    ) -> Result<v1::LivenessVerdict, Error> {
        Ok(self
            .upstream
            .captcha(ctx, appkey, challenge_key, snapshots)
            .await?)
    }

    /// Submits document images; sent at most once.
    pub async fn submit_document_images(
        &self,
        ctx: &CallContext,
        appkey: &Appkey,
        images: &[ImagePayload],
    ) -> Result<i64, Error> {
        Ok(self
            .upstream
            .document_images(ctx, appkey, images)
            .await?
            .document_code)
    }

    /// Submits the digital licence; sent at most once.
    pub async fn submit_digital_licence(
        &self,
        ctx: &CallContext,
        appkey: &Appkey,
        licence: &ImagePayload,
    ) -> Result<i64, Error> {
        Ok(self
            .upstream
            .digital_licence(ctx, appkey, licence)
            .await?
            .document_code)
    }
}
