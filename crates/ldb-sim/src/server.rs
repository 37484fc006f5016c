//! The HTTP server: routes per personality, shared state, start and shutdown.

mod api_frames;
mod cache_reset;
mod errors;
mod frames;
mod generate;
mod info;
mod metrics;
mod request;
mod script;
mod stream;
mod tool_call;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::routing::{get, post};
use rand::SeedableRng;
use rand::rngs::SmallRng;
use tokio::sync::oneshot;

use crate::engine::stats::EngineStats;
use crate::engine::{Command, EngineHandle, lock};
use crate::error::{Result, SimError};
use crate::personality::Personality;
use crate::scenario::Scenario;

/// What the HTTP layer saw, counted exactly.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HttpStats {
    /// Requests per route (e.g. `POST /v1/chat/completions`, `GET /metrics`).
    pub requests_by_endpoint: BTreeMap<String, u64>,
    /// Generation requests with `stream: true`.
    pub streaming: u64,
    /// Generation requests without streaming.
    pub non_streaming: u64,
    /// Generation requests rejected with the engine's 4xx error JSON.
    pub rejected: u64,
    /// Requests answered with an injected 5xx.
    pub injected_errors: u64,
    /// Streams cut by the drop fault.
    pub injected_drops: u64,
    /// Streams paused by the stall fault.
    pub injected_stalls: u64,
    /// Malformed SSE lines written.
    pub injected_malformed: u64,
    /// Streams that got only keep-alive comments (`keepalive_only_share`).
    pub injected_keepalive_only: u64,
    /// `/metrics` answers that failed on purpose.
    pub metrics_failures: u64,
    /// `/metrics` answers that showed the phantom queue of
    /// `metrics_queue_blip_after_s`.
    pub injected_queue_blips: u64,
    /// The generation request whose quiet stretch the last phantom queue
    /// belonged to (its arrival, seconds since the start), and the reads of
    /// it still to show.
    pub(crate) queue_blip_state: (f64, u32),
    /// When each generation request arrived, seconds since the simulator
    /// started (the first [`MAX_ARRIVALS`]): the truth an open-loop
    /// client's schedule is checked against.
    pub arrivals: Vec<f64>,
    /// When each `GET /metrics` arrived, Unix seconds (the first
    /// [`MAX_ARRIVALS`]): how often a client read the metrics, and when.
    pub metrics_arrivals_unix: Vec<f64>,
}

/// Arrival times kept, at most (8 MB).
pub const MAX_ARRIVALS: usize = 1_000_000;

/// The engine's counters, readable from any thread (see [`SimHandle::truth`]).
#[derive(Clone)]
pub struct TruthProbe(Arc<std::sync::Mutex<crate::engine::stats::EngineStats>>);

impl TruthProbe {
    /// Tokens generated and sent so far, and the sequences running now.
    pub fn generated_and_running(&self) -> (u64, usize) {
        let s = crate::engine::lock(&self.0);
        (s.generated_tokens, s.running)
    }
}

/// Truth counters of a running simulator (see [`SimHandle::stats`]).
#[derive(Debug, Clone, PartialEq)]
pub struct SimStats {
    /// The engine's counters: tokens, steps, spec decode, KV, queue.
    pub engine: EngineStats,
    /// The HTTP layer's counters: requests by endpoint and kind, injected faults.
    pub http: HttpStats,
}

pub(crate) struct AppState {
    pub cfg: Arc<Scenario>,
    pub personality: Personality,
    pub engine: EngineHandle,
    pub http: Mutex<HttpStats>,
    pub fault_rng: Mutex<SmallRng>,
    pub next_id: AtomicU64,
    /// Chat requests served a scripted answer so far (`output.answers`).
    pub next_answer: AtomicU64,
    /// Chat and completion requests received so far (`faults.error_requests`).
    pub generation_requests: AtomicU64,
    pub started_unix: u64,
    /// The simulator's start, for [`HttpStats::arrivals`].
    pub started: tokio::time::Instant,
    /// The same, to the millisecond: `process_start_time_seconds`, which
    /// tells a restarted simulator from the one before.
    pub started_unix_f: f64,
}

impl AppState {
    pub(crate) fn count(&self, endpoint: &str) {
        let mut http = lock(&self.http);
        match http.requests_by_endpoint.get_mut(endpoint) {
            Some(n) => *n += 1,
            None => {
                http.requests_by_endpoint.insert(endpoint.to_string(), 1);
            }
        }
    }

    /// A deterministic 32-hex-digit id (seeded counter).
    pub(crate) fn new_id(&self) -> (u64, String) {
        let n = self.next_id.fetch_add(1, Ordering::Relaxed);
        let a = splitmix(self.cfg.seed ^ splitmix(n));
        let b = splitmix(a ^ n);
        (n, format!("{a:016x}{b:016x}"))
    }

    /// `created` for chunks: the scenario's fixed value, else the wall clock.
    pub(crate) fn created(&self) -> u64 {
        if self.cfg.server.created > 0 {
            return self.cfg.server.created;
        }
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
    }

    /// Draw from the seeded fault generator.
    pub(crate) fn draw(&self) -> f64 {
        use rand::Rng;
        lock(&self.fault_rng).random::<f64>()
    }
}

fn splitmix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Entry point: start a simulated server.
pub struct SimServer;

impl SimServer {
    /// Bind `addr` (port 0 picks a free port), spawn the engine and the HTTP server on the
    /// current tokio runtime, and return a handle. `personality` `None` uses the scenario's.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), ldb_sim::SimError> {
    /// use ldb_sim::{Scenario, SimServer};
    /// let sim = SimServer::start(Scenario::builtin("quickstart")?, None, "127.0.0.1:0".parse().unwrap()).await?;
    /// println!("serving at {}", sim.base_url());
    /// sim.shutdown().await;
    /// # Ok(()) }
    /// ```
    pub async fn start(
        scenario: Scenario,
        personality: Option<Personality>,
        addr: SocketAddr,
    ) -> Result<SimHandle> {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| SimError::Bind {
                addr,
                reason: e.to_string().to_lowercase(),
            })?;
        Self::serve(scenario, personality, listener)
    }

    /// Serve on a socket the caller bound already, so its address is known
    /// before the simulator starts (the benchmark decides its target once,
    /// while it checks its flags, and starts the simulator later).
    pub fn start_on(
        scenario: Scenario,
        personality: Option<Personality>,
        listener: std::net::TcpListener,
    ) -> Result<SimHandle> {
        listener.set_nonblocking(true)?;
        Self::serve(
            scenario,
            personality,
            tokio::net::TcpListener::from_std(listener)?,
        )
    }

    fn serve(
        scenario: Scenario,
        personality: Option<Personality>,
        listener: tokio::net::TcpListener,
    ) -> Result<SimHandle> {
        let local = listener.local_addr()?;
        let personality = personality.unwrap_or(scenario.personality);
        let cfg = Arc::new(scenario);
        let (engine, engine_task) = EngineHandle::spawn(Arc::clone(&cfg));
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let started_unix = now.as_secs();
        let started_unix_f = (now.as_millis() as f64) / 1000.0;
        let state = Arc::new(AppState {
            fault_rng: Mutex::new(SmallRng::seed_from_u64(cfg.seed ^ 0x5eed_fa17)),
            cfg,
            personality,
            engine: engine.clone(),
            http: Mutex::new(HttpStats::default()),
            next_id: AtomicU64::new(0),
            next_answer: AtomicU64::new(0),
            generation_requests: AtomicU64::new(0),
            started_unix,
            started: tokio::time::Instant::now(),
            started_unix_f,
        });
        let app = router(personality, Arc::clone(&state));
        let (stop_tx, stop_rx) = oneshot::channel::<()>();
        // Real engines' HTTP servers (uvicorn, llama.cpp's) disable Nagle;
        // without it the first small SSE write waits for the client's ACK.
        let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
            let _ = tcp.set_nodelay(true);
        });
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = stop_rx.await;
                })
                .await;
        });
        Ok(SimHandle {
            addr: local,
            state,
            engine,
            stop: Some(stop_tx),
            server,
            engine_task,
        })
    }
}

fn router(personality: Personality, state: Arc<AppState>) -> Router {
    let mut app = Router::new()
        .route("/v1/chat/completions", post(generate::chat))
        .route("/v1/completions", post(generate::completions))
        .route("/v1/models", get(info::models));
    let resets = state.cfg.server.cache_reset_enabled;
    app = match personality {
        Personality::Vllm => app
            .route("/version", get(info::version))
            .route("/health", get(info::health))
            .route("/ping", get(info::health))
            .route("/tokenize", post(info::tokenize))
            .route("/metrics", get(metrics::metrics)),
        Personality::Sglang => app
            .route("/health", get(info::health))
            .route("/health_generate", get(info::health))
            .route("/get_server_info", get(info::server_info))
            .route("/server_info", get(info::server_info))
            .route("/get_model_info", get(info::model_info))
            .route("/abort_request", post(info::abort))
            .route(
                "/flush_cache",
                get(cache_reset::sglang_flush).post(cache_reset::sglang_flush),
            )
            .route("/tokenize", post(info::tokenize))
            .route("/v1/tokenize", post(info::tokenize))
            .route("/metrics", get(metrics::metrics)),
        Personality::LlamaCpp => app
            .route("/health", get(info::health))
            .route("/v1/health", get(info::health))
            .route("/props", get(info::props))
            .route("/slots", get(info::slots))
            .route("/slots/{id}", post(cache_reset::llamacpp_slot_action))
            .route("/tokenize", post(info::tokenize))
            .route("/metrics", get(metrics::metrics)),
        Personality::OpenAi => app,
    };
    // vLLM 0.32, SGLang 0.5.23 and llama.cpp 11434 serve both (their route
    // tables); the bare proxy stands for a server that serves neither.
    if personality != Personality::OpenAi {
        app = app
            .route("/v1/responses", post(api_frames::responses))
            .route("/v1/messages", post(api_frames::messages));
    }
    // vLLM serves its reset only in dev mode (VLLM_SERVER_DEV_MODE=1).
    if resets && personality == Personality::Vllm {
        app = app.route("/reset_prefix_cache", post(cache_reset::vllm_reset));
    }
    let key = state.cfg.server.api_key.clone();
    let app = app.fallback(info::not_found).with_state(state);
    match key {
        Some(key) => app.layer(axum::middleware::from_fn(move |req, next| {
            check_key(key.clone(), req, next)
        })),
        None => app,
    }
}

/// vLLM's `--api-key`: `/v1/*` needs the bearer key, other routes stay open.
async fn check_key(
    key: String,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let needs_key = req.uri().path().starts_with("/v1/");
    let given = req
        .headers()
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    if needs_key && given != Some(key.as_str()) {
        return (
            axum::http::StatusCode::UNAUTHORIZED,
            axum::Json(serde_json::json!({"error": "Unauthorized"})),
        )
            .into_response();
    }
    next.run(req).await
}

/// A running simulator. Prefer [`SimHandle::shutdown`]; dropping the handle also stops the
/// engine and the listener, without waiting.
pub struct SimHandle {
    addr: SocketAddr,
    state: Arc<AppState>,
    engine: EngineHandle,
    stop: Option<oneshot::Sender<()>>,
    server: tokio::task::JoinHandle<()>,
    engine_task: tokio::task::JoinHandle<()>,
}

impl Drop for SimHandle {
    fn drop(&mut self) {
        let _ = self.engine.tx.send(Command::Shutdown);
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

impl SimHandle {
    /// The bound address (with the real port when 0 was asked for).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://IP:PORT`, without a trailing slash.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The personality being served.
    pub fn personality(&self) -> Personality {
        self.state.personality
    }

    /// The scenario being served.
    pub fn scenario(&self) -> &Scenario {
        &self.state.cfg
    }

    /// A handle on the engine's counters that other threads can read at
    /// any moment without going through HTTP (a `/metrics` scrape waits
    /// behind the simulator's own work, which blurs a window's edges).
    pub fn truth(&self) -> TruthProbe {
        TruthProbe(Arc::clone(&self.engine.stats))
    }

    /// A copy of the truth counters right now.
    pub fn stats(&self) -> SimStats {
        SimStats {
            engine: self.engine.snapshot(),
            http: lock(&self.state.http).clone(),
        }
    }

    /// Stop accepting, end every open stream, and wait (at most 5 s) for the tasks to finish.
    pub async fn shutdown(mut self) {
        let _ = self.engine.tx.send(Command::Shutdown);
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = tokio::time::timeout(Duration::from_secs(5), &mut self.server).await;
        self.server.abort();
        let _ = tokio::time::timeout(Duration::from_secs(1), &mut self.engine_task).await;
    }
}
