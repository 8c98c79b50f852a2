//! Request messages tests send: the sandbox's persons, document images
//! and liveness snapshots that steer its answers, and routing weights.

use idgate::{
    proto::v1,
    sandbox::samples::{self, DocumentKind, DocumentType, LivenessOutcome, Side},
};

/// The sandbox's default person (registry positive) as a request.
pub fn happy_person() -> v1::CreateJourneyRequest {
    person(samples::HAPPY_PERSON)
}

/// A sandbox test person as a request.
pub fn person(p: samples::TestPerson) -> v1::CreateJourneyRequest {
    let parts: Vec<&str> = p.birth_date.split('/').collect();
    v1::CreateJourneyRequest {
        cpf: p.cpf.into(),
        name: p.name.into(),
        birth_date: format!("{}-{}-{}", parts[2], parts[1], parts[0]),
        customer_reference: "TESTREF1".into(),
        operator_profile: String::new(),
        request_id: String::new(),
    }
}

/// RG front and back images with sandbox markers.
pub fn rg_images() -> Vec<v1::DocumentImage> {
    use samples::{DocumentKind, DocumentType, Side};
    Side::ALL
        .into_iter()
        .map(|side| v1::DocumentImage {
            content: samples::document_image(DocumentKind::new(DocumentType::Rg, side)).into(),
        })
        .collect()
}

/// One snapshot per challenge of `ch`, tagged with its face type code,
/// each making the proof end with `outcome`.
pub fn snapshots_for(
    ch: &v1::CreateChallengesResponse,
    outcome: LivenessOutcome,
) -> Vec<v1::Snapshot> {
    assert!(!ch.challenges.is_empty(), "challenges were generated");
    ch.challenges
        .iter()
        .map(|c| v1::Snapshot {
            image: samples::snapshot(outcome).into(),
            face_type_code: c.face_type.as_ref().expect("face type").code.clone(),
        })
        .collect()
}

/// Front and back images of `doc_type`.
pub fn document_pair(doc_type: DocumentType) -> Vec<Vec<u8>> {
    Side::ALL
        .into_iter()
        .map(|side| samples::document_image(DocumentKind::new(doc_type, side)))
        .collect()
}

/// A weighted split as `SetRoutingMode` weights: `[("primary", 90), ...]`.
pub fn weights(split: &[(&str, u32)]) -> Vec<v1::ChannelWeight> {
    split
        .iter()
        .map(|(channel, weight)| v1::ChannelWeight {
            channel: (*channel).into(),
            weight: *weight,
        })
        .collect()
}
