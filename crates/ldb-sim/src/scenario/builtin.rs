//! Scenarios embedded in the binary. The files live in the repository's `scenarios/`;
//! `crates/ldb-sim/scenarios/` links to them so the crate packages on its own
//! (`cargo package` copies the files the links point to).

/// Names of the embedded scenarios, in display order.
pub(crate) const NAMES: &[&str] = &[
    "quickstart",
    "glm-5.3-flash-4gpu",
    "sglang-dcp",
    "llamacpp-4slot",
    "firehose",
    "firehose-paced",
    "tiny-test",
];

/// The TOML text of a built-in scenario.
pub(crate) fn text(name: &str) -> Option<&'static str> {
    Some(match name {
        "quickstart" => include_str!("../../scenarios/quickstart.toml"),
        "glm-5.3-flash-4gpu" => include_str!("../../scenarios/glm-5.3-flash-4gpu.toml"),
        "sglang-dcp" => include_str!("../../scenarios/sglang-dcp.toml"),
        "llamacpp-4slot" => include_str!("../../scenarios/llamacpp-4slot.toml"),
        "firehose" => include_str!("../../scenarios/firehose.toml"),
        "firehose-paced" => include_str!("../../scenarios/firehose-paced.toml"),
        "tiny-test" => include_str!("../../scenarios/tiny-test.toml"),
        _ => return None,
    })
}
