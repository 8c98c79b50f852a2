//! The views checked against the API's descriptors rather than against a
//! list kept by hand: a result is filled from the descriptors (every
//! field, every oneof member in turn, a canary in every `bytes` field and
//! in every raw JSON object), each view is applied, and its encoding is
//! read back with the descriptors.

use std::collections::{BTreeSet, HashMap};

use prost::{
    Message as _,
    bytes::Buf as _,
    encoding::{WireType, decode_key, decode_varint, encode_key, encode_varint},
};
use prost_types::{
    DescriptorProto, FieldDescriptorProto, FileDescriptorSet, field_descriptor_proto::Type,
};

use super::*;
use crate::proto::FILE_DESCRIPTOR_SET;

const ROOT: &str = ".idgate.v1.JourneyResult";
/// In every `bytes` field.
const IMAGE_CANARY: &[u8] = b"CANARY-IMAGE-BYTES";
/// In every string of a raw JSON object (its keys and its values).
const RAW_JSON_CANARY: &str = "CANARY-RAW-JSON";
/// In every other string: personal data `no_images` keeps.
const TEXT: &str = "text";
/// Words that name an image, a photo or a document's content.
const IMAGE_WORDS: &[&str] = &[
    "image", "photo", "selfie", "frontal", "picture", "portrait", "scan", "content",
];
/// Messages that carry JSON as the upstream sent it.
const RAW_JSON: &[&str] = &[
    ".google.protobuf.Struct",
    ".google.protobuf.Value",
    ".google.protobuf.ListValue",
];
/// Deep enough for every message of the API and a JSON object nested in
/// a JSON object.
const MAX_DEPTH: usize = 10;

/// Every message of the API and its imports, by full name (`.pkg.Name`).
struct Schema(HashMap<String, DescriptorProto>);

impl Schema {
    fn load() -> Self {
        let set = FileDescriptorSet::decode(FILE_DESCRIPTOR_SET).expect("the descriptor set");
        let mut messages = HashMap::new();
        for file in set.file {
            let prefix = format!(".{}", file.package());
            for message in file.message_type {
                insert(&mut messages, &prefix, message);
            }
        }
        assert!(messages.contains_key(ROOT) && messages.contains_key(RAW_JSON[0]));
        Self(messages)
    }

    fn message(&self, name: &str) -> &DescriptorProto {
        self.0
            .get(name)
            .unwrap_or_else(|| panic!("no message {name}"))
    }

    /// Why `field` of `message` may carry an image or raw JSON, if it may.
    fn sensitive(&self, message: &str, field: &FieldDescriptorProto) -> Option<&'static str> {
        let type_name = field.type_name().to_ascii_lowercase();
        let named_like_an_image = |name: &str| IMAGE_WORDS.iter().any(|w| name.contains(w));
        if field.r#type() == Type::Bytes {
            Some("bytes")
        } else if RAW_JSON.contains(&field.type_name()) && !RAW_JSON.contains(&message) {
            Some("raw JSON")
        } else if named_like_an_image(&field.name().to_ascii_lowercase())
            || named_like_an_image(type_name.rsplit('.').next().unwrap_or_default())
        {
            Some("named like an image")
        } else {
            None
        }
    }

    /// Every sensitive field reachable from `root`, by the descriptors
    /// alone (not entered: what is under one is the view's to leave out).
    fn reachable(&self, root: &str) -> BTreeSet<String> {
        let mut seen = BTreeSet::from([root.to_owned()]);
        let mut stack = vec![root.to_owned()];
        let mut found = BTreeSet::new();
        while let Some(name) = stack.pop() {
            for field in &self.message(&name).field {
                if self.sensitive(&name, field).is_some() {
                    found.insert(format!("{name}.{}", field.name()));
                } else if field.r#type() == Type::Message && seen.insert(field.type_name().into()) {
                    stack.push(field.type_name().to_owned());
                }
            }
        }
        found
    }

    /// An encoded `name` with every field set; of each oneof, the member
    /// `pick` (modulo its size).
    fn fill(&self, name: &str, pick: usize, depth: usize, out: &mut Vec<u8>) {
        let message = self.message(name);
        let raw_json = RAW_JSON.iter().any(|r| name.starts_with(r));
        for field in &message.field {
            if !self.picked(message, field, pick) {
                continue;
            }
            let number = u32::try_from(field.number()).expect("a field number");
            match field.r#type() {
                Type::Message if depth < MAX_DEPTH => {
                    let mut inner = Vec::new();
                    self.fill(field.type_name(), pick, depth + 1, &mut inner);
                    length_delimited(number, &inner, out);
                }
                Type::Message | Type::Group => {}
                Type::Bytes => length_delimited(number, IMAGE_CANARY, out),
                Type::String if raw_json => {
                    length_delimited(number, RAW_JSON_CANARY.as_bytes(), out);
                }
                Type::String => length_delimited(number, TEXT.as_bytes(), out),
                Type::Double | Type::Fixed64 | Type::Sfixed64 => {
                    encode_key(number, WireType::SixtyFourBit, out);
                    out.extend_from_slice(&1f64.to_le_bytes());
                }
                Type::Float | Type::Fixed32 | Type::Sfixed32 => {
                    encode_key(number, WireType::ThirtyTwoBit, out);
                    out.extend_from_slice(&1f32.to_le_bytes());
                }
                _ => {
                    encode_key(number, WireType::Varint, out);
                    encode_varint(1, out);
                }
            }
        }
    }

    /// Whether `field` is set when oneof members are picked by `pick`.
    fn picked(&self, message: &DescriptorProto, field: &FieldDescriptorProto, pick: usize) -> bool {
        let Some(oneof) = field.oneof_index.filter(|_| !field.proto3_optional()) else {
            return true;
        };
        let members: Vec<&str> = message
            .field
            .iter()
            .filter(|f| f.oneof_index == Some(oneof))
            .map(FieldDescriptorProto::name)
            .collect();
        members[pick % members.len()] == field.name()
    }

    /// The sensitive fields set in `bytes`, an encoded `name`.
    fn present(&self, name: &str, mut bytes: &[u8], found: &mut BTreeSet<String>) {
        let message = self.message(name);
        while bytes.has_remaining() {
            let (number, wire) = decode_key(&mut bytes).expect("a key");
            let field = message
                .field
                .iter()
                .find(|f| u32::try_from(f.number()) == Ok(number));
            let value = match wire {
                WireType::Varint => {
                    decode_varint(&mut bytes).expect("a varint");
                    continue;
                }
                WireType::SixtyFourBit => {
                    bytes.advance(8);
                    continue;
                }
                WireType::ThirtyTwoBit => {
                    bytes.advance(4);
                    continue;
                }
                WireType::LengthDelimited => {
                    let len = usize::try_from(decode_varint(&mut bytes).expect("a length"))
                        .expect("a length");
                    let (value, rest) = bytes.split_at(len);
                    bytes = rest;
                    value
                }
                other => panic!("unexpected wire type {other:?}"),
            };
            let Some(field) = field else { continue };
            if self.sensitive(name, field).is_some() {
                found.insert(format!("{name}.{}", field.name()));
            } else if field.r#type() == Type::Message {
                self.present(field.type_name(), value, found);
            }
        }
    }

    /// The largest oneof: how many picks set every member once.
    fn picks(&self) -> usize {
        self.0
            .values()
            .flat_map(|m| {
                m.oneof_decl.iter().enumerate().map(|(i, _)| {
                    let i = i32::try_from(i).expect("an index");
                    m.field
                        .iter()
                        .filter(|f| f.oneof_index == Some(i) && !f.proto3_optional())
                        .count()
                })
            })
            .max()
            .unwrap_or(1)
            .max(1)
    }
}

fn insert(messages: &mut HashMap<String, DescriptorProto>, prefix: &str, message: DescriptorProto) {
    let name = format!("{prefix}.{}", message.name());
    for nested in &message.nested_type {
        insert(messages, &name, nested.clone());
    }
    messages.insert(name, message);
}

fn length_delimited(number: u32, value: &[u8], out: &mut Vec<u8>) {
    encode_key(number, WireType::LengthDelimited, out);
    encode_varint(value.len() as u64, out);
    out.extend_from_slice(value);
}

/// Results filled from the descriptors, one per oneof pick.
fn filled_results(schema: &Schema) -> Vec<JourneyResult> {
    (0..schema.picks())
        .map(|pick| {
            let mut encoded = Vec::new();
            schema.fill(ROOT, pick, 0, &mut encoded);
            JourneyResult::decode(encoded.as_slice()).expect("a filled result decodes")
        })
        .collect()
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[test]
fn no_view_but_full_reaches_a_bytes_image_or_raw_json_field() {
    let schema = Schema::load();
    let reachable = schema.reachable(ROOT);
    assert!(
        reachable.contains(".idgate.v1.Photos.liveness_frontal")
            || reachable.contains(".idgate.v1.JourneyResult.photos"),
        "the walk sees the photos: {reachable:?}"
    );
    for (view, build) in [
        (ResultView::Full, full as Viewer),
        (ResultView::NoImages, no_images),
        (ResultView::StatusOnly, status_only),
    ] {
        let mut present = BTreeSet::new();
        for result in filled_results(&schema) {
            schema.present(ROOT, &build(&result).encode_to_vec(), &mut present);
        }
        match view {
            // The fill reaches every sensitive field, so the check below
            // misses none.
            ResultView::Full => assert_eq!(present, reachable),
            _ => assert!(
                present.is_empty(),
                "{view:?} holds a bytes, image or raw JSON field: {present:?}"
            ),
        }
    }
}

#[test]
fn a_result_full_of_canaries_keeps_none_in_no_images_or_status_only() {
    let schema = Schema::load();
    for result in filled_results(&schema) {
        let whole = full(&result).encode_to_vec();
        assert!(contains(&whole, IMAGE_CANARY));
        for (view, build) in [
            ("no_images", no_images as Viewer),
            ("status_only", status_only),
        ] {
            let encoded = build(&result).encode_to_vec();
            assert!(!contains(&encoded, IMAGE_CANARY), "{view} holds an image");
            assert!(
                !contains(&encoded, RAW_JSON_CANARY.as_bytes()),
                "{view} holds raw JSON"
            );
        }
        let kept = no_images(&result).encode_to_vec();
        assert!(contains(&kept, TEXT.as_bytes()), "no_images keeps the OCR");
    }
    let raw_json_in_full = filled_results(&schema)
        .iter()
        .any(|r| contains(&full(r).encode_to_vec(), RAW_JSON_CANARY.as_bytes()));
    assert!(raw_json_in_full, "the fill puts raw JSON in the full view");
}

#[test]
fn each_view_leaves_out_what_it_says() {
    use crate::proto::v1::{DocumentPhoto, OcrData, Photos, RgOcr};

    let r = JourneyResult {
        status: 1,
        raw_status: "CONCLUIDO".into(),
        customer_reference: "CANARY-REF".into(),
        document_analysis: Some(DocumentAnalysis {
            processing_status: 4,
            score: Some(0.9),
            ocr: Some(OcrData {
                rg: Some(RgOcr {
                    name: "CANARY NAME".into(),
                    cpf: "CANARY-CPF".into(),
                    parents: "CANARY PARENTS".into(),
                    ..RgOcr::default()
                }),
                ..OcrData::default()
            }),
            ..DocumentAnalysis::default()
        }),
        photos: Some(Photos {
            liveness_frontal: bytes::Bytes::from_static(b"CANARY-SELFIE"),
            documents: vec![DocumentPhoto {
                description: "front".into(),
                image: bytes::Bytes::from_static(b"CANARY-DOC"),
            }],
        }),
        ..JourneyResult::default()
    };
    // The wire bytes, lossily as text (the result's Debug is redacted).
    let text = |r: &JourneyResult| String::from_utf8_lossy(&r.encode_to_vec()).into_owned();

    let whole = text(&apply(ResultView::Full, r.clone()));
    assert!(whole.contains("CANARY-SELFIE") && whole.contains("CANARY-CPF"));

    let kept = text(&apply(ResultView::NoImages, r.clone()));
    assert!(kept.contains("CANARY-CPF"), "OCR stays");
    assert!(!kept.contains("CANARY-SELFIE") && !kept.contains("CANARY-DOC"));

    let status = apply(ResultView::StatusOnly, r);
    assert!(!text(&status).contains("CANARY"));
    assert_eq!(status.status, 1);
    assert_eq!(
        status.document_analysis.map(|d| d.processing_status),
        Some(4)
    );
}
