//! `DocumentService`: document images and the digital driver licence.

use tonic::{Request, Response, Status};

use super::{deadline, validate};
use crate::{
    journey::JourneyCore,
    proto::v1::{self, document_service_server::DocumentService},
};

/// The `DocumentService` implementation.
pub struct DocumentApi {
    core: JourneyCore,
}

impl DocumentApi {
    /// A service over the journey core.
    pub fn new(core: JourneyCore) -> Self {
        Self { core }
    }
}

#[tonic::async_trait]
impl DocumentService for DocumentApi {
    #[tracing::instrument(skip_all, fields(idgate.journey_ref))]
    async fn submit_document_images(
        &self,
        request: Request<v1::SubmitDocumentImagesRequest>,
    ) -> Result<Response<v1::SubmitDocumentImagesResponse>, Status> {
        let ctx = deadline::context(&request);
        let span = super::server_span(&request);
        let (appkey, images) = validate::document_images(request.into_inner(), self.core.limits())?;
        super::record_journey(&span, &appkey);
        let document_code = self
            .core
            .submit_document_images(&ctx, &appkey, &images)
            .await?;
        Ok(Response::new(v1::SubmitDocumentImagesResponse {
            document_code,
        }))
    }

    #[tracing::instrument(skip_all, fields(idgate.journey_ref))]
    async fn submit_digital_licence(
        &self,
        request: Request<v1::SubmitDigitalLicenceRequest>,
    ) -> Result<Response<v1::SubmitDigitalLicenceResponse>, Status> {
        let ctx = deadline::context(&request);
        let span = super::server_span(&request);
        let (appkey, licence) =
            validate::digital_licence(request.into_inner(), self.core.limits())?;
        super::record_journey(&span, &appkey);
        let document_code = self
            .core
            .submit_digital_licence(&ctx, &appkey, &licence)
            .await?;
        Ok(Response::new(v1::SubmitDigitalLicenceResponse {
            document_code,
        }))
    }
}
