//! The crate's error type.

use std::net::SocketAddr;

/// Everything that can go wrong when configuring or starting the simulator.
///
/// Every variant renders as one line that names what was wrong and what was expected.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// An engine personality string that is not one of the known ones.
    #[error("unknown engine `{0}`: expected one of vllm, sglang, llamacpp (or llama.cpp), openai")]
    UnknownPersonality(String),
    /// A scenario name that is neither built in nor a readable file.
    #[error(
        "unknown scenario `{name}`: not a built-in ({builtins}) and not a readable file ({reason})"
    )]
    UnknownScenario {
        /// What the user asked for.
        name: String,
        /// Comma-separated built-in names.
        builtins: String,
        /// Why reading it as a file failed.
        reason: String,
    },
    /// A scenario file that does not parse or does not validate.
    #[error("{origin}: {message}")]
    Scenario {
        /// The file (or built-in name) the scenario came from.
        origin: String,
        /// One line naming the key and the expected form.
        message: String,
    },
    /// The listening socket could not be bound.
    #[error("cannot bind {addr}: {reason}")]
    Bind {
        /// The address we tried.
        addr: SocketAddr,
        /// The operating system's reason, lower-case.
        reason: String,
    },
    /// Any other I/O failure while starting the server.
    #[error("simulator I/O error: {0}")]
    Io(#[from] std::io::Error),
}

/// Result alias for this crate.
pub type Result<T> = std::result::Result<T, SimError>;
