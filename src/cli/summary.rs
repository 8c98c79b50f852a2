//! A readable summary of a journey result for a terminal. It names codes,
//! classes and counts; it prints no personal data (no name, CPF, date or
//! image) even though the terminal is the caller's own.

use std::fmt::Write as _;

use crate::proto::v1;

/// Renders `result` as indented lines.
pub fn render(result: &v1::JourneyResult) -> String {
    let mut out = String::new();
    let status = v1::JourneyStatus::try_from(result.status)
        .map(|s| {
            s.as_str_name()
                .trim_start_matches("JOURNEY_STATUS_")
                .to_owned()
        })
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "  status               {} ({status})",
        result.raw_status
    );
    let _ = writeln!(
        out,
        "  appkey created       {} (upstream wrote {:?})",
        result
            .appkey_create_time
            .as_ref()
            .map_or_else(|| "-".to_owned(), ToString::to_string),
        result.raw_appkey_create_time
    );
    if let Some(l) = result.liveness.as_ref().and_then(|l| l.variant.as_ref()) {
        match l {
            v1::liveness_result::Variant::Journey(j) => {
                let _ = writeln!(
                    out,
                    "  liveness             valid={} codID={} ({})",
                    j.valid,
                    j.raw_code,
                    enum_name(
                        v1::LivenessCode::try_from(j.code)
                            .ok()
                            .map(|c| c.as_str_name()),
                        "LIVENESS_CODE_"
                    )
                );
            }
            v1::liveness_result::Variant::DigitalLicence(d) => {
                let _ = writeln!(
                    out,
                    "  liveness             validated={} codID={}",
                    d.validated, d.raw_code
                );
            }
        }
    }
    if let Some(f) = result.face_bureau.as_ref().and_then(|f| f.variant.as_ref()) {
        match f {
            v1::face_bureau_result::Variant::Journey(j) => {
                let _ = writeln!(
                    out,
                    "  face bureau          code={} risk class={} ({})",
                    j.raw_code,
                    j.raw_score,
                    enum_name(
                        v1::RiskClass::try_from(j.risk_class)
                            .ok()
                            .map(|c| c.as_str_name()),
                        "RISK_CLASS_"
                    )
                );
            }
            v1::face_bureau_result::Variant::DigitalLicence(d) => {
                let _ = writeln!(
                    out,
                    "  face bureau          approved={} known={} biometric score={}",
                    d.approved,
                    d.known,
                    d.biometric_score
                        .map(|s| format!("{s:.1}"))
                        .unwrap_or_else(|| "-".into())
                );
            }
        }
    }
    if let Some(a) = &result.document_analysis {
        let status = enum_name(
            v1::ProcessingStatus::try_from(a.processing_status)
                .ok()
                .map(|c| c.as_str_name()),
            "PROCESSING_STATUS_",
        );
        let _ = writeln!(
            out,
            "  document analysis    status={} ({status}) forensics score={}",
            a.raw_processing_status,
            a.score
                .map(|s| format!("{s:.0}"))
                .unwrap_or_else(|| "-".into())
        );
        for f in &a.files {
            for d in &f.documents {
                let kind = enum_name(
                    v1::DocumentKind::try_from(d.kind)
                        .ok()
                        .map(|c| c.as_str_name()),
                    "DOCUMENT_KIND_",
                );
                let _ = writeln!(
                    out,
                    "    file {}             {kind} (tipo {}), file status {}, read status {}",
                    f.sequence, d.raw_kind, f.raw_status, d.raw_status
                );
            }
        }
        if let Some(ocr) = &a.ocr {
            let kinds: Vec<&str> = [
                (ocr.rg.is_some(), "RG"),
                (ocr.cnh.is_some(), "CNH"),
                (ocr.dni.is_some(), "DNI"),
                (ocr.cin.is_some(), "CIN"),
                (ocr.digital_cnh.is_some(), "digital CNH"),
                (ocr.crnm.is_some(), "CRNM"),
                (ocr.passport.is_some(), "passport"),
            ]
            .into_iter()
            .filter_map(|(present, name)| present.then_some(name))
            .collect();
            let _ = writeln!(
                out,
                "  OCR                  {}",
                if kinds.is_empty() {
                    "-".into()
                } else {
                    kinds.join(", ")
                }
            );
        }
        if let Some(b) = &a.biometrics {
            for (label, check) in [("face match", &b.face_match), ("registry", &b.registry)] {
                match check {
                    Some(c) => {
                        let _ = writeln!(
                            out,
                            "  {label:<20} code={} ({}) score={}",
                            c.raw_code,
                            enum_name(
                                v1::BiometricCode::try_from(c.code)
                                    .ok()
                                    .map(|x| x.as_str_name()),
                                "BIOMETRIC_CODE_"
                            ),
                            c.score
                                .map(|s| format!("{s:.2}"))
                                .unwrap_or_else(|| "-".into())
                        );
                    }
                    None => {
                        let _ = writeln!(out, "  {label:<20} (not run for this customer)");
                    }
                }
            }
        }
    }
    if let Some(p) = &result.photos {
        let _ = writeln!(
            out,
            "  photos               liveness frontal: {} bytes; {} document image(s)",
            p.liveness_frontal.len(),
            p.documents.len()
        );
    }
    out
}

fn enum_name(name: Option<&'static str>, prefix: &str) -> String {
    name.map(|n| n.trim_start_matches(prefix).to_owned())
        .unwrap_or_else(|| "UNLISTED".to_owned())
}
