//! At rest as on Redis: after a real journey (created with a
//! `request_id`, its 3D proof and documents through the gateway), the
//! store's directory holds no appkey, CPF, name or birth date in clear,
//! and no caller's token.

use idgate::{proto::v1, sandbox::samples};

use super::{Site, files_under, holds};
use crate::support::{gateway::rg_images, jwt::bearer};

#[tokio::test]
async fn the_store_holds_no_appkey_cpf_name_or_token_in_clear_after_a_real_journey() {
    let site = Site::new("").await;
    let owner = site.token("svc-owner");
    let replica = site.serve().await;
    let created = replica
        .create(&owner, &uuid::Uuid::new_v4().to_string())
        .await
        .expect("create");
    let session = replica
        .start_3d(&owner, &created.appkey)
        .await
        .expect("start a 3D session");
    replica
        .liveness()
        .verify_liveness3_d(bearer(
            &owner,
            v1::VerifyLiveness3DRequest {
                appkey: created.appkey.clone(),
                session_token: session.session_token.clone(),
                channel: session.channel.clone(),
            },
        ))
        .await
        .expect("verify");
    replica
        .documents()
        .submit_document_images(bearer(
            &owner,
            v1::SubmitDocumentImagesRequest {
                appkey: created.appkey.clone(),
                images: rg_images(),
            },
        ))
        .await
        .expect("documents");
    replica.stop("TERM").await;

    let person = samples::HAPPY_PERSON;
    let cpf_digits: String = person.cpf.chars().filter(char::is_ascii_digit).collect();
    let secrets = [
        created.appkey.as_str(),
        person.cpf,
        cpf_digits.as_str(),
        person.name,
        person.birth_date,
        session.session_token.as_str(),
        owner.as_str(),
    ];
    let files = files_under(&site.store_dir());
    assert!(
        files.iter().any(|(path, _)| path.ends_with("store.redb")),
        "{files:?}"
    );
    for (path, bytes) in &files {
        for secret in secrets {
            assert!(
                !holds(bytes, secret.as_bytes()),
                "{} holds a personal or secret value in clear",
                path.display()
            );
        }
    }
}
