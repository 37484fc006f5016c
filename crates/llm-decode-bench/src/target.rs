//! Where a session sends its requests, decided once while the flags are
//! lowered: the server of `--host`/`--port`, or the built-in simulator of
//! `--sim NAME`. For the simulator, its scenario is read and its loopback
//! port bound during lowering, so the run configuration is built with the
//! final address and never rewritten; the session driver starts serving on
//! that socket just before the startup.

use ldb_runner::RunConfig;
use ldb_runner::config::TargetConfig;

use crate::error::AppError;

/// The server a session talks to.
pub(crate) enum Target {
    /// The address in the run configuration (`--host`, `--port`).
    Server,
    /// The built-in simulator, in this process.
    Sim(Box<SimTarget>),
}

/// `--sim NAME`: the scenario, the personality and the bound socket.
pub(crate) struct SimTarget {
    name: String,
    scenario: ldb_sim::Scenario,
    personality: Option<ldb_sim::Personality>,
    listener: std::net::TcpListener,
}

impl Target {
    /// `--sim NAME [--sim-engine E]`: checked and the port reserved; `None`
    /// for a real server.
    pub(crate) fn lower(sim: Option<&str>, engine: Option<&str>) -> Result<Target, AppError> {
        let Some(name) = sim else {
            return Ok(Target::Server);
        };
        let personality = engine
            .map(str::parse::<ldb_sim::Personality>)
            .transpose()
            .map_err(|e| AppError::config(format!("invalid --sim-engine: {e}")))?;
        let scenario = ldb_sim::Scenario::load(name).map_err(AppError::config)?;
        let listener = std::net::TcpListener::bind(("127.0.0.1", 0))
            .map_err(|e| AppError::config(format!("cannot start the simulator: {e}")))?;
        Ok(Target::Sim(Box::new(SimTarget {
            name: name.to_string(),
            scenario,
            personality,
            listener,
        })))
    }

    /// True when the simulator runs in this process: each stream then holds
    /// two sockets (both ends), which the open-file limit must allow.
    pub(crate) fn in_process(&self) -> bool {
        matches!(self, Target::Sim(_))
    }

    /// The run configuration pointed at this target (built once, here).
    pub(crate) fn point(&self, cfg: RunConfig) -> Result<RunConfig, AppError> {
        match self {
            Target::Server => Ok(cfg),
            Target::Sim(s) => {
                let addr = s
                    .listener
                    .local_addr()
                    .map_err(|e| AppError::config(format!("cannot start the simulator: {e}")))?;
                Ok(RunConfig {
                    target: TargetConfig {
                        base_url: format!("http://{addr}"),
                        server_label: format!("{addr} (simulator: {})", s.name),
                        sim_scenario: s.name.clone(),
                        ..cfg.target
                    },
                    ..cfg
                })
            }
        }
    }

    /// Serve the simulator on its socket (nothing for a real server).
    pub(crate) fn start(self) -> Result<Option<ldb_sim::SimHandle>, AppError> {
        match self {
            Target::Server => Ok(None),
            Target::Sim(s) => ldb_sim::SimServer::start_on(s.scenario, s.personality, s.listener)
                .map(Some)
                .map_err(|e| AppError::config(format!("cannot start the simulator: {e}"))),
        }
    }
}
