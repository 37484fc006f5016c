//! What keeps the shards' pods small on a shared cluster: who they run as
//! and what they may do (security contexts), what they may use (requests
//! and limits), how long they may live, and who may reach their coordinator
//! port (a NetworkPolicy). docs/security.md lists why each field is there.

use serde_json::{Value, json};

use super::{K8sArgs, check_dns_label};
use crate::error::AppError;

/// The user and group the shards run as: the image's `USER`
/// (deploy/Containerfile), not root, and not an ID a base image gives a
/// real account.
pub const RUN_AS_ID: u32 = 65532;

/// The labels of every shard's pod; the Service, the NetworkPolicy and its
/// `from` rule all select by them.
pub fn pod_labels(name: &str) -> Value {
    json!({
        "app.kubernetes.io/name": "llm-decode-bench",
        "app.kubernetes.io/instance": name,
    })
}

/// The pod's security context: not root (checked by the kubelet too), the
/// runtime's default seccomp filter, and the volumes' files group-owned by
/// the shards' group so that a fresh emptyDir or claim is writable.
pub fn pod_security() -> Value {
    json!({
        "runAsNonRoot": true,
        "runAsUser": RUN_AS_ID,
        "runAsGroup": RUN_AS_ID,
        "fsGroup": RUN_AS_ID,
        "seccompProfile": { "type": "RuntimeDefault" },
    })
}

/// The container's security context: no privilege gain (setuid binaries,
/// file capabilities), every capability dropped (the benchmark only opens
/// TCP connections and listens on an unprivileged port), and a read-only
/// root file system (it writes only to the results and /tmp volumes).
pub fn container_security() -> Value {
    json!({
        "allowPrivilegeEscalation": false,
        "readOnlyRootFilesystem": true,
        "runAsNonRoot": true,
        "capabilities": { "drop": ["ALL"] },
    })
}

/// A Kubernetes quantity (`2`, `1500m`, `2Gi`) as a number, so that
/// a request above its limit is refused here rather than by the API server.
pub fn quantity(flag: &str, s: &str) -> Result<f64, AppError> {
    const SUFFIXES: [(&str, f64); 14] = [
        ("Ki", 1024.0),
        ("Mi", 1048576.0),
        ("Gi", 1073741824.0),
        ("Ti", 1099511627776.0),
        ("Pi", 1125899906842624.0),
        ("Ei", 1152921504606846976.0),
        ("m", 1e-3),
        ("k", 1e3),
        ("M", 1e6),
        ("G", 1e9),
        ("T", 1e12),
        ("P", 1e15),
        ("E", 1e18),
        ("", 1.0),
    ];
    let bad = || {
        AppError::config(format!(
            "{flag} {s:?} is not a Kubernetes quantity (a positive number with an optional \
             suffix: m, k, M, G, Ki, Mi, Gi, …; e.g. 1500m, 2, 4Gi)"
        ))
    };
    let (digits, scale) = SUFFIXES
        .iter()
        .find_map(|(suf, f)| s.strip_suffix(suf).map(|d| (d, *f)))
        .ok_or_else(bad)?;
    // digits and one dot only: no sign, no exponent, no `inf`/`NaN`
    let plain = !digits.is_empty()
        && digits.chars().all(|c| c.is_ascii_digit() || c == '.')
        && digits.matches('.').count() <= 1
        && digits != ".";
    let v: f64 = if plain {
        digits.parse().map_err(|_| bad())?
    } else {
        return Err(bad());
    };
    if v > 0.0 { Ok(v * scale) } else { Err(bad()) }
}

/// `resources` of the shard's container, from the flags; a request above
/// its limit is bad input (exit 2).
pub fn resources(a: &K8sArgs) -> Result<Value, AppError> {
    for (what, req, lim) in [
        ("cpu", &a.cpu_request, &a.cpu_limit),
        ("memory", &a.memory_request, &a.memory_limit),
    ] {
        let r = quantity(&format!("--{what}-request"), req)?;
        let l = quantity(&format!("--{what}-limit"), lim)?;
        if r > l {
            return Err(AppError::config(format!(
                "--{what}-request {req} is above --{what}-limit {lim}"
            )));
        }
    }
    Ok(json!({
        "requests": { "cpu": a.cpu_request, "memory": a.memory_request },
        "limits": { "cpu": a.cpu_limit, "memory": a.memory_limit },
    }))
}

/// Ingress to the shards' pods: the coordinator port, from the pods of
/// this Job only (same namespace, same labels). Nothing else may connect to
/// them (their outgoing connections, to the server and DNS, are left
/// alone). A `--metrics-listen` port is closed by it too: docs/deploy.md
/// says how to open one.
pub fn network_policy(a: &K8sArgs) -> Result<Value, AppError> {
    let name = format!("{}-coordinator", a.name);
    check_dns_label("the NetworkPolicy's name", &name, 253)?;
    Ok(json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {
            "name": name,
            "namespace": a.namespace,
            "labels": pod_labels(&a.name),
        },
        "spec": {
            "podSelector": { "matchLabels": pod_labels(&a.name) },
            "policyTypes": ["Ingress"],
            "ingress": [{
                "from": [{ "podSelector": { "matchLabels": pod_labels(&a.name) } }],
                "ports": [{ "protocol": "TCP", "port": a.port }],
            }],
        },
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_read_as_kubernetes_writes_them() {
        assert_eq!(quantity("f", "2").unwrap(), 2.0);
        assert_eq!(quantity("f", "1500m").unwrap(), 1.5);
        assert_eq!(quantity("f", "4Gi").unwrap(), 4.0 * 1073741824.0);
        assert_eq!(quantity("f", "0.5").unwrap(), 0.5);
        for bad in [
            "", "0", "-1", "1.2.3", "2gb", "inf", "NaN", "1e3", "Gi", ".", "2 Gi",
        ] {
            assert_eq!(
                quantity("--cpu-limit", bad).unwrap_err().exit_code(),
                2,
                "{bad}"
            );
        }
    }

    #[test]
    fn the_image_runs_as_the_user_the_pods_ask_for() {
        let containerfile = include_str!("../../../../deploy/Containerfile");
        assert!(containerfile.contains(&format!("\nUSER {RUN_AS_ID}:{RUN_AS_ID}\n")));
    }
}
