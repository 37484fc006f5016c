//! `llm-decode-bench`: the command-line front end.
fn main() {}
