//! Maestro's wire contract, generated from Maestro's own proto
//! (proto/io/cloudevents/v1/cloudevent.proto, a verbatim copy of sdk-go's;
//! docs/design/10-upstream-facts.md §10.12): the source and the simulated Maestro each take
//! their messages from it, never from each other's code.
//!
//! protox parses the proto in Rust (it carries Google's well-known imports
//! itself) and prost-build writes the messages, so a build needs no protoc.
//! Only messages are generated: the client calls `Subscribe` by hand, so no
//! code in the crate names `Publish` as a call (docs/design/09b-reading-the-upstreams.md §9.10).

use std::path::PathBuf;

const PROTO: &str = "proto/io/cloudevents/v1/cloudevent.proto";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed={PROTO}");
    // The imports (google/protobuf/*) come along for prost-build to resolve
    // the field types; it maps them to prost-types, not to new code.
    let files = protox::compile([PROTO], ["proto"])?;
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    prost_build::Config::new()
        // Payloads as `bytes::Bytes`: an event's JSON is read without a copy.
        .bytes(["."])
        .out_dir(&out)
        .compile_fds(files)?;
    Ok(())
}
