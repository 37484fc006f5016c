//! The HTTP side of llm-decode-bench: server discovery, measured streaming
//! requests, and `/metrics` scraping. Parsing and accounting live in
//! `ldb-core`; this crate only moves bytes and stamps times.

pub mod api_probe;
pub mod clock;
pub mod discovery;
pub mod engine_info;
pub mod error;
pub mod http;
pub mod lean;
pub mod replicas;
pub mod scrape;
pub mod stream;
pub mod text_stream;
pub mod token_seconds;
pub mod token_tail;
mod woken;

pub use error::{ClientError, Result};
pub use http::Http;
