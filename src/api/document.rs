//! `DocumentService`: document images and the digital driver licence.
//!
//! Each method is the door's shim ([`super::admitted`]): the journey is
//! found, checked and billed before the `inner_*` function runs.

use std::sync::Arc;

use tonic::{Request, Response, Status};

use super::{
    Admitted, ApiContext,
    validate::{DocumentSubmission, LicenceSubmission},
};
use crate::{
    Error,
    proto::{services::DocumentService, v1},
};

/// The `DocumentService` implementation.
pub struct DocumentApi {
    api: Arc<ApiContext>,
}

impl DocumentApi {
    /// A service in the public API's context.
    pub fn new(api: Arc<ApiContext>) -> Self {
        Self { api }
    }

    async fn inner_document_images(
        &self,
        admitted: &Admitted,
        req: DocumentSubmission,
    ) -> Result<v1::SubmitDocumentImagesResponse, Error> {
        let document_code = self
            .api
            .journeys()
            .core()
            .submit_document_images(admitted.ctx(), &req.appkey, &req.images)
            .await?;
        Ok(v1::SubmitDocumentImagesResponse { document_code })
    }

    async fn inner_digital_licence(
        &self,
        admitted: &Admitted,
        req: LicenceSubmission,
    ) -> Result<v1::SubmitDigitalLicenceResponse, Error> {
        let document_code = self
            .api
            .journeys()
            .core()
            .submit_digital_licence(admitted.ctx(), &req.appkey, &req.licence)
            .await?;
        Ok(v1::SubmitDigitalLicenceResponse { document_code })
    }
}

#[tonic::async_trait]
impl DocumentService for DocumentApi {
    async fn submit_document_images(
        &self,
        request: Request<v1::SubmitDocumentImagesRequest>,
    ) -> Result<Response<v1::SubmitDocumentImagesResponse>, Status> {
        let (admitted, req, _) = self.api.enter(request).await?;
        let result = self.inner_document_images(&admitted, req).await;
        admitted.finish(result)
    }

    async fn submit_digital_licence(
        &self,
        request: Request<v1::SubmitDigitalLicenceRequest>,
    ) -> Result<Response<v1::SubmitDigitalLicenceResponse>, Status> {
        let (admitted, req, _) = self.api.enter(request).await?;
        let result = self.inner_digital_licence(&admitted, req).await;
        admitted.finish(result)
    }
}
