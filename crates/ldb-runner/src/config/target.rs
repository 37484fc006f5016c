//! The server a run talks to: where it is, how to reach it, what it serves.

/// Which server, model and metrics endpoints a run uses (read by startup,
/// the client and the `/metrics` reader).
#[derive(Debug, Clone)]
pub struct TargetConfig {
    /// Base URL, e.g. `http://127.0.0.1:8000`.
    pub base_url: String,
    /// Label for reports (`host:port` or the URL as given).
    pub server_label: String,
    /// Bearer key (never written anywhere).
    pub api_key: Option<String>,
    /// Model name; None = first served model.
    pub model: Option<String>,
    /// `--metrics-url`: replicas behind a router whose `/metrics` are read
    /// and combined instead of the server's own (empty: the server's).
    pub metrics_urls: Vec<String>,
    /// Seconds to wait for a server that is still starting (`--wait-for-server`, 0 = none).
    pub wait_for_server: f64,
    /// Simulator scenario name when `--sim` was used.
    pub sim_scenario: String,
    /// The API generation requests speak (`--api`).
    pub api: ldb_core::api::Api,
}

impl Default for TargetConfig {
    fn default() -> Self {
        TargetConfig {
            base_url: "http://localhost:5000".into(),
            server_label: "localhost:5000".into(),
            api_key: None,
            model: None,
            metrics_urls: Vec::new(),
            wait_for_server: 0.0,
            sim_scenario: String::new(),
            api: ldb_core::api::Api::Chat,
        }
    }
}
