//! `DocumentService`: document images and the digital driver licence.

use tonic::{Request, Response, Status};

use super::{Admitted, JourneyAccess, LimitsConfig, admit, validate};
use crate::{
    Error,
    domain::Operation,
    journey::JourneyCore,
    proto::{services::DocumentService, v1},
    spend::{BilledOperation, SpendGuard},
};

/// The `DocumentService` implementation.
pub struct DocumentApi {
    core: JourneyCore,
    limits: LimitsConfig,
    guard: SpendGuard,
    access: JourneyAccess,
}

impl DocumentApi {
    /// A service over the journey core, refusing requests past `limits`.
    pub fn new(core: JourneyCore, limits: LimitsConfig) -> Self {
        Self {
            core,
            limits,
            guard: SpendGuard::default(),
            access: JourneyAccess::default(),
        }
    }

    /// The journey checks (issued here, owned by the caller); default: no
    /// record held, so every appkey is refused as foreign.
    pub fn with_access(mut self, access: JourneyAccess) -> Self {
        self.access = access;
        self
    }

    /// The spending guard, which bills document submissions; default: no
    /// budgets.
    pub fn with_guard(mut self, guard: SpendGuard) -> Self {
        self.guard = guard;
        self
    }
}

impl DocumentApi {
    async fn inner_document_images(
        &self,
        admitted: &mut Admitted,
        message: v1::SubmitDocumentImagesRequest,
    ) -> Result<v1::SubmitDocumentImagesResponse, Error> {
        let req = validate::document_images(message, &self.limits)?;
        admitted.journey_of(&req.appkey);
        let billed = BilledOperation::SubmitDocuments;
        self.access
            .billed(admitted.caller(), &req.appkey, &self.guard, billed)
            .await?;
        admitted.sending(Operation::DocumentImages);
        let document_code = self
            .core
            .submit_document_images(admitted.ctx(), &req.appkey, &req.images)
            .await?;
        Ok(v1::SubmitDocumentImagesResponse { document_code })
    }

    async fn inner_digital_licence(
        &self,
        admitted: &mut Admitted,
        message: v1::SubmitDigitalLicenceRequest,
    ) -> Result<v1::SubmitDigitalLicenceResponse, Error> {
        let req = validate::digital_licence(message, &self.limits)?;
        admitted.journey_of(&req.appkey);
        let billed = BilledOperation::SubmitDocuments;
        self.access
            .billed(admitted.caller(), &req.appkey, &self.guard, billed)
            .await?;
        admitted.sending(Operation::DigitalLicence);
        let document_code = self
            .core
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
        let (mut admitted, message) = admit(request)?;
        let result = self.inner_document_images(&mut admitted, message).await;
        admitted.finish(result)
    }

    async fn submit_digital_licence(
        &self,
        request: Request<v1::SubmitDigitalLicenceRequest>,
    ) -> Result<Response<v1::SubmitDigitalLicenceResponse>, Status> {
        let (mut admitted, message) = admit(request)?;
        let result = self.inner_digital_licence(&mut admitted, message).await;
        admitted.finish(result)
    }
}
