//! Library files the user names in the environment: `LDB_NVRTC_LIBRARY`
//! and `LDB_NCCL_LIBRARY` (pip wheels put NVRTC and NCCL where the dynamic
//! loader does not look).
//!
//! Loading such a file is a promise nobody can check: its initialisers run,
//! and its symbols are then called with NVRTC's or NCCL's signatures, so a
//! file that only exports the same names can corrupt memory. The loaders
//! that take arbitrary names ([`crate::nvrtc::Nvrtc::load`],
//! [`crate::nccl::Nccl::load`]) are therefore `unsafe fn`; their safe entry
//! points take the names from here: the library's own file names, or the
//! file the user named in the variable documented as "the path of that
//! library" (docs/fabric.md), which must at least be named like it. Setting
//! the variable is the user's statement that the file is that library, the
//! same trust as putting it on `LD_LIBRARY_PATH`.

/// The environment variable naming an NVRTC library file.
pub const NVRTC_ENV: &str = "LDB_NVRTC_LIBRARY";
/// The environment variable naming an NCCL library file.
pub const NCCL_ENV: &str = "LDB_NCCL_LIBRARY";

/// `path` names a file of library `stem` (`nvrtc`, `nccl`): its last
/// component starts with `lib<stem>.so` (`libnccl.so.2`,
/// `/opt/…/libnvrtc.so.12.4.127`). Refuses the look-alikes a typo or a
/// wrong variable would give (`libnvrtc-builtins.so`, `libc.so.6`, a folder).
pub fn check_library_file(path: &str, stem: &str) -> Result<(), String> {
    let file = path.rsplit('/').next().unwrap_or(path);
    if file.starts_with(&format!("lib{stem}.so")) {
        Ok(())
    } else {
        Err(format!(
            "{path:?} is not named like the {stem} library (lib{stem}.so…): \
             name the library file itself"
        ))
    }
}

/// The names to ask the loader for: `overridden` (the variable's value)
/// when set and not blank, checked with [`check_library_file`], then the
/// library's own `defaults`.
pub fn library_names(
    var: &str,
    overridden: Option<String>,
    stem: &str,
    defaults: &[&str],
) -> Result<Vec<String>, String> {
    let user = overridden.filter(|p| !p.trim().is_empty());
    if let Some(p) = &user {
        check_library_file(p, stem).map_err(|e| format!("{var}: {e}"))?;
    }
    Ok(user
        .into_iter()
        .chain(defaults.iter().map(|d| (*d).to_string()))
        .collect())
}

/// [`library_names`] with the variable read from the environment.
pub fn names_from_env(var: &str, stem: &str, defaults: &[&str]) -> Result<Vec<String>, String> {
    library_names(var, std::env::var(var).ok(), stem, defaults)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_override_comes_first_and_must_be_named_like_the_library() {
        let d = ["libnccl.so.2", "libnccl.so"];
        assert_eq!(library_names(NCCL_ENV, None, "nccl", &d).unwrap(), d);
        assert_eq!(
            library_names(NCCL_ENV, Some(" ".into()), "nccl", &d).unwrap(),
            d
        );
        assert_eq!(
            library_names(
                NCCL_ENV,
                Some("/opt/nccl/lib/libnccl.so.2".into()),
                "nccl",
                &d
            )
            .unwrap(),
            ["/opt/nccl/lib/libnccl.so.2", "libnccl.so.2", "libnccl.so"]
        );
        for bad in [
            "libc.so.6",
            "/opt/nvrtc/libnvrtc-builtins.so.12",
            "/opt/lib/",
            "nccl",
        ] {
            let e = library_names(NVRTC_ENV, Some(bad.into()), "nvrtc", &d).unwrap_err();
            assert!(e.starts_with("LDB_NVRTC_LIBRARY: "), "{e}");
        }
        assert!(check_library_file("libnvrtc.so.12", "nvrtc").is_ok());
    }
}
