//! Integration tests of the simulator over loopback HTTP.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod sim {
    mod bad_input;
    mod cache_sharing;
    pub mod client;
    mod contract;
    mod discovery;
    mod engine_fixtures;
    mod faults;
    mod model;
}
