//! `DocumentService`: document images and the digital driver licence.

use tonic::{Request, Response, Status};

use super::{JourneyAccess, LimitsConfig, validate};
use crate::{
    context::CallContext,
    domain::Permission,
    guard::{BilledOperation, Guard},
    journey::JourneyCore,
    proto::{services::DocumentService, v1},
};

/// The `DocumentService` implementation.
pub struct DocumentApi {
    core: JourneyCore,
    limits: LimitsConfig,
    guard: Guard,
    access: JourneyAccess,
}

impl DocumentApi {
    /// A service over the journey core, refusing requests past `limits`.
    pub fn new(core: JourneyCore, limits: LimitsConfig) -> Self {
        Self {
            core,
            limits,
            guard: Guard::default(),
            access: JourneyAccess::default(),
        }
    }

    /// The journey checks (issued here, owned by the caller); default: no
    /// directory, so every appkey is refused as foreign.
    pub fn with_access(mut self, access: JourneyAccess) -> Self {
        self.access = access;
        self
    }

    /// The spending guard, which bills document submissions; default: no
    /// budgets.
    pub fn with_guard(mut self, guard: Guard) -> Self {
        self.guard = guard;
        self
    }
}

#[tonic::async_trait]
impl DocumentService for DocumentApi {
    async fn submit_document_images(
        &self,
        request: Request<v1::SubmitDocumentImagesRequest>,
    ) -> Result<Response<v1::SubmitDocumentImagesResponse>, Status> {
        let audit = super::Audit::start(&request, "documents", false);
        let result = async {
            let caller = super::authorize(&request, Permission::Documents)?;
            let _slot = self.access.call_slot(request.extensions(), &caller)?;
            let ctx = CallContext::of(&request);
            let span = super::server_span(&request);
            let (_, extensions, message) = request.into_parts();
            let req = validate::document_images(message, &self.limits)?;
            audit.journey(&super::record_journey(&span, &req.appkey));
            self.access
                .billed(
                    &extensions,
                    &caller,
                    &req.appkey,
                    &self.guard,
                    BilledOperation::SubmitDocuments,
                )
                .await?;
            let document_code = self
                .core
                .submit_document_images(&ctx, &req.appkey, &req.images)
                .await?;
            Ok(Response::new(v1::SubmitDocumentImagesResponse {
                document_code,
            }))
        }
        .await;
        audit.finish(result)
    }

    async fn submit_digital_licence(
        &self,
        request: Request<v1::SubmitDigitalLicenceRequest>,
    ) -> Result<Response<v1::SubmitDigitalLicenceResponse>, Status> {
        let audit = super::Audit::start(&request, "documents", false);
        let result = async {
            let caller = super::authorize(&request, Permission::Documents)?;
            let _slot = self.access.call_slot(request.extensions(), &caller)?;
            let ctx = CallContext::of(&request);
            let span = super::server_span(&request);
            let (_, extensions, message) = request.into_parts();
            let req = validate::digital_licence(message, &self.limits)?;
            audit.journey(&super::record_journey(&span, &req.appkey));
            self.access
                .billed(
                    &extensions,
                    &caller,
                    &req.appkey,
                    &self.guard,
                    BilledOperation::SubmitDocuments,
                )
                .await?;
            let document_code = self
                .core
                .submit_digital_licence(&ctx, &req.appkey, &req.licence)
                .await?;
            Ok(Response::new(v1::SubmitDigitalLicenceResponse {
                document_code,
            }))
        }
        .await;
        audit.finish(result)
    }
}
