//! The simulated Maestro's wire messages, generated from Maestro's own proto
//! (the repository's proto/io/cloudevents/v1/cloudevent.proto, a verbatim copy
//! of sdk-go's) on their own, not taken from the exporter's source: a
//! mistake in one is not shared by the other (docs/design/10-upstream-facts.md §10.12).

use std::path::PathBuf;

const PROTO_DIR: &str = "../../proto";
const PROTO: &str = "../../proto/io/cloudevents/v1/cloudevent.proto";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed={PROTO}");
    let files = protox::compile([PROTO], [PROTO_DIR])?;
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    prost_build::Config::new()
        .bytes(["."])
        .out_dir(&out)
        .compile_fds(files)?;
    Ok(())
}
