//! Error responses in each engine's JSON shape.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::personality::Personality;

/// A request the simulated engine refuses.
#[derive(Debug, Clone)]
pub(crate) enum ApiError {
    /// Malformed or invalid request (400).
    BadRequest {
        message: String,
        param: Option<&'static str>,
    },
    /// Prompt plus output does not fit the context (400).
    Context {
        prompt: u32,
        max_tokens: u32,
        limit: u32,
    },
    /// Requested model does not exist (404).
    ModelNotFound(String),
    /// Unknown route (404).
    RouteNotFound(String),
    /// Injected fault with this status.
    Injected(u16),
}

impl ApiError {
    pub(crate) fn bad(message: impl Into<String>, param: Option<&'static str>) -> Self {
        ApiError::BadRequest {
            message: message.into(),
            param,
        }
    }

    fn status(&self) -> StatusCode {
        match self {
            ApiError::BadRequest { .. } | ApiError::Context { .. } => StatusCode::BAD_REQUEST,
            ApiError::ModelNotFound(_) | ApiError::RouteNotFound(_) => StatusCode::NOT_FOUND,
            ApiError::Injected(code) => {
                StatusCode::from_u16(*code).unwrap_or(StatusCode::SERVICE_UNAVAILABLE)
            }
        }
    }

    fn message(&self, p: Personality) -> String {
        match self {
            ApiError::BadRequest { message, .. } => message.clone(),
            ApiError::Context {
                prompt,
                max_tokens,
                limit,
            } => context_message(p, *prompt, *max_tokens, *limit),
            ApiError::ModelNotFound(m) => match p {
                Personality::Sglang => format!("The model '{m}' does not exist"),
                _ => format!("The model `{m}` does not exist."),
            },
            ApiError::RouteNotFound(path) => match p {
                Personality::LlamaCpp => "File Not Found".to_string(),
                _ => format!("Not Found: {path}"),
            },
            ApiError::Injected(code) => format!("simulated server error (injected fault {code})"),
        }
    }

    /// The engine's JSON body for this error.
    pub(crate) fn body(&self, p: Personality) -> Value {
        let status = self.status().as_u16();
        let message = self.message(p);
        match p {
            Personality::Vllm | Personality::OpenAi => {
                let (kind, param) = match self {
                    ApiError::BadRequest { param, .. } => {
                        ("BadRequestError", param.map(str::to_string))
                    }
                    ApiError::Context { .. } => {
                        ("BadRequestError", Some("input_tokens".to_string()))
                    }
                    ApiError::ModelNotFound(_) => ("NotFoundError", Some("model".to_string())),
                    ApiError::RouteNotFound(_) => ("NotFoundError", None),
                    ApiError::Injected(_) => ("InternalServerError", None),
                };
                json!({"error": {"message": message, "type": kind, "param": param, "code": status}})
            }
            Personality::Sglang => {
                let (kind, param) = match self {
                    ApiError::BadRequest { param, .. } => {
                        ("Bad Request", param.map(str::to_string))
                    }
                    ApiError::Context { .. } => ("BadRequestError", None),
                    ApiError::ModelNotFound(_) => {
                        ("invalid_request_error", Some("model".to_string()))
                    }
                    ApiError::RouteNotFound(_) => ("NotFoundError", None),
                    ApiError::Injected(_) => ("InternalServerError", None),
                };
                json!({"object": "error", "message": message, "type": kind, "param": param, "code": status})
            }
            Personality::LlamaCpp => {
                let kind = match self {
                    ApiError::BadRequest { .. } => "invalid_request_error",
                    ApiError::Context { .. } => "exceed_context_size_error",
                    ApiError::ModelNotFound(_) | ApiError::RouteNotFound(_) => "not_found_error",
                    ApiError::Injected(_) => "server_error",
                };
                let mut err = json!({"code": status, "message": message, "type": kind});
                if let ApiError::Context { prompt, limit, .. } = self {
                    err["n_prompt_tokens"] = json!(prompt);
                    err["n_ctx"] = json!(limit);
                }
                json!({"error": err})
            }
        }
    }

    /// Status plus body for personality `p`.
    pub(crate) fn into_response_for(self, p: Personality) -> Response {
        (self.status(), Json(self.body(p))).into_response()
    }
}

fn context_message(p: Personality, prompt: u32, max_tokens: u32, limit: u32) -> String {
    match p {
        Personality::Vllm | Personality::OpenAi => format!(
            "This model's maximum context length is {limit} tokens. However, you requested \
             {max_tokens} output tokens and your prompt contains {prompt} input tokens, for a \
             total of {} tokens. Please reduce the length of the input prompt or the number of \
             requested output tokens.",
            u64::from(prompt) + u64::from(max_tokens)
        ),
        Personality::Sglang if prompt >= limit => format!(
            "The input ({prompt} tokens) is longer than the model's context length ({limit} tokens)."
        ),
        Personality::Sglang => format!(
            "Requested token count exceeds the model's maximum context length of {limit} tokens. \
             You requested a total of {} tokens: {prompt} tokens from the input messages and \
             {max_tokens} tokens for the completion. Please reduce the number of tokens in the \
             input messages or the completion to fit within the limit.",
            u64::from(prompt) + u64::from(max_tokens)
        ),
        Personality::LlamaCpp => format!(
            "request ({prompt} tokens) exceeds the available context size ({limit} tokens), try \
             increasing it"
        ),
    }
}
