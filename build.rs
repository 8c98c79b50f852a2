//! Compiles `proto/idgate/v1` with protox (pure Rust, no `protoc` needed) and
//! writes the file descriptor set that server reflection serves.

use std::{env, path::PathBuf};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protos = [
        "proto/idgate/v1/journey.proto",
        "proto/idgate/v1/liveness.proto",
        "proto/idgate/v1/document.proto",
        "proto/idgate/v1/result.proto",
        "proto/idgate/v1/channel_admin.proto",
    ];
    for p in &protos {
        println!("cargo:rerun-if-changed={p}");
    }
    let fds = protox::compile(protos, ["proto"])?;
    let out = PathBuf::from(env::var("OUT_DIR")?);
    std::fs::write(
        out.join("idgate_descriptor.bin"),
        prost::Message::encode_to_vec(&fds),
    )?;
    tonic_prost_build::configure()
        .bytes(".")
        .build_client(true)
        .build_server(true)
        .compile_fds(fds)?;
    Ok(())
}
