//! `deploy k8s`: a headless Service and an Indexed Job, as YAML.
//!
//! Kubernetes gives each pod of an Indexed Job its index in
//! `JOB_COMPLETION_INDEX` (the shards' default `--shard-index`) and the
//! hostname `NAME-INDEX`; with `subdomain` set to a headless Service of the
//! same pods, shard 0 is reachable at `NAME-0.NAME.NS.svc.DOMAIN`, which is
//! the coordinator every shard is given. The objects are built as JSON values
//! and printed by a YAML serializer, so quoting is never done by hand. The
//! pods are hardened and fenced in by [`super::k8s_hardening`].

use serde_json::{Value, json};

use super::flags::BenchFlags;
use super::k8s_hardening::{
    container_security, network_policy, pod_labels, pod_security, resources,
};
use super::{API_KEY_ENV, K8sArgs, SECRET_ENV, check_dns_label, result_file, shell_quote};
use crate::error::AppError;

/// Where the writable scratch volume is mounted (the root file system is
/// read-only): temporary files, and `HOME` for anything that writes there.
pub const TMP_DIR: &str = "/tmp";

/// The key of the API key inside its Kubernetes Secret.
pub const API_KEY_KEY: &str = "api-key";

/// Where the results volume is mounted; also the container's working
/// directory, so a relative `--output` lands on it.
pub const RESULTS_DIR: &str = "/results";

/// The key of the join secret inside the Kubernetes Secret.
pub const SECRET_KEY: &str = "secret";

/// The script the container runs (`sh -c`): the benchmark with the shard
/// flags and then the user's flags (`"$@"`, the pod's `args`, unchanged);
/// then, on shard 0 only, the result printed to the log between two marker
/// lines, and the pod kept up for `kubectl cp`.
fn container_script(shards: u32, coordinator: &str) -> String {
    format!(
        "llm-decode-bench --shards {shards} --coordinator {coordinator} \"$@\"\n\
         rc=$?\n\
         if [ \"${{JOB_COMPLETION_INDEX:-0}}\" = 0 ]; then\n\
         \x20 if [ -f \"$LDB_RESULT_FILE\" ]; then\n\
         \x20   echo \"=== llm-decode-bench result $LDB_RESULT_FILE begin ===\"\n\
         \x20   cat \"$LDB_RESULT_FILE\"\n\
         \x20   echo \"=== llm-decode-bench result end ===\"\n\
         \x20 fi\n\
         \x20 sleep \"$LDB_KEEP_SECONDS\"\n\
         fi\n\
         exit \"$rc\"\n",
        coordinator = shell_quote(coordinator),
    )
}

/// The Service, the NetworkPolicy, the Job, and a comment header on how to
/// make the Secrets and collect the result.
pub fn render(a: &K8sArgs, flags: &BenchFlags) -> Result<String, AppError> {
    // pod hostnames are NAME-INDEX and must stay a DNS label
    check_dns_label("--name", &a.name, 63 - 5)?;
    check_dns_label("--namespace", &a.namespace, 63)?;
    let secret = a
        .secret_name
        .clone()
        .unwrap_or_else(|| format!("{}-shard-secret", a.name));
    check_dns_label("--secret-name", &secret, 253)?;
    if let Some(claim) = &a.output_volume {
        check_dns_label("--output-volume", claim, 253)?;
    }
    // the key goes to the shards from a Secret, named or defaulted
    let api_key = (flags.api_key || a.api_key_secret.is_some()).then(|| {
        a.api_key_secret
            .clone()
            .unwrap_or_else(|| format!("{}-api-key", a.name))
    });
    if let Some(s) = &api_key {
        check_dns_label("--api-key-secret", s, 253)?;
    }
    let keep = keep_seconds(a);
    if u64::from(keep) >= u64::from(a.deadline_seconds) {
        return Err(AppError::config(format!(
            "--deadline-seconds {} leaves no time to run: shard 0 alone waits {keep} s \
             (--keep-seconds) after the run",
            a.deadline_seconds
        )));
    }
    let coordinator = format!(
        "{name}-0.{name}.{ns}.svc.{domain}:{port}",
        name = a.name,
        ns = a.namespace,
        domain = a.cluster_domain,
        port = a.port
    );
    let header = header(a, flags, &secret, api_key.as_deref());
    let service = service(a);
    let policy = network_policy(a)?;
    let pod = PodInputs {
        secret: &secret,
        api_key: api_key.as_deref(),
        coordinator: &coordinator,
        resources: resources(a)?,
    };
    let job = job(a, flags, &pod);
    let yaml = |v: &Value| {
        serde_yaml_ng::to_string(v)
            .map_err(|e| AppError::Output(format!("cannot render the manifest as YAML: {e}")))
    };
    Ok(format!(
        "{header}---\n{}---\n{}---\n{}",
        yaml(&service)?,
        yaml(&policy)?,
        yaml(&job)?
    ))
}

/// Seconds shard 0 stays up after the run (see `--keep-seconds`).
fn keep_seconds(a: &K8sArgs) -> u32 {
    a.keep_seconds
        .unwrap_or(if a.output_volume.is_some() { 0 } else { 300 })
}

/// YAML comments: the Secret to create first (its value is never printed
/// here), how to apply, watch and collect.
fn header(a: &K8sArgs, flags: &BenchFlags, secret: &str, api_key: Option<&str>) -> String {
    let ns = &a.namespace;
    let result = result_file(&flags.words);
    let key = match api_key {
        Some(k) => format!(
            "#   the server's API key (taken out of the flags; it is never written here):\n\
             #   kubectl -n {ns} create secret generic {k} --from-literal={API_KEY_KEY}=\"${API_KEY_ENV}\"\n"
        ),
        None => String::new(),
    };
    let collect = match &a.output_volume {
        Some(claim) => format!(
            "#   the result stays on the claim {claim} as {result} (followers: <stem>.shard-I.json)\n"
        ),
        None => format!(
            "#   kubectl -n {ns} cp \"${{leader#pod/}}:{RESULTS_DIR}/{result}\" {result}\n\
             #   (while shard 0 waits its --keep-seconds after the run; any time, from its log:\n\
             #    kubectl -n {ns} logs \"$leader\" | sed -n '/=== llm-decode-bench result .* begin ===/,/=== llm-decode-bench result end ===/p' | sed '1d;$d' > {result})\n"
        ),
    };
    format!(
        "# llm-decode-bench: {shards} shards as a Kubernetes Indexed Job (docs/deploy.md)\n\
         # 1. the join secret, once per namespace (its value never appears in these manifests):\n\
         #   kubectl -n {ns} create secret generic {secret} --from-literal={SECRET_KEY}=\"$(head -c 32 /dev/urandom | base64)\"\n\
         {key}\
         # 2. apply, then follow shard 0 (the leader):\n\
         #   llm-decode-bench deploy k8s ... | kubectl apply -f -\n\
         #   leader=$(kubectl -n {ns} get pod -l job-name={name},batch.kubernetes.io/job-completion-index=0 -o name)\n\
         #   kubectl -n {ns} logs -f \"$leader\"\n\
         # 3. collect its result:\n{collect}",
        shards = a.shards,
        name = a.name,
    )
}

/// The headless Service that gives each pod a stable DNS name.
fn service(a: &K8sArgs) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": a.name,
            "namespace": a.namespace,
            "labels": pod_labels(&a.name),
        },
        "spec": {
            "clusterIP": "None",
            // the coordinator must resolve before any pod is Ready
            "publishNotReadyAddresses": true,
            "selector": pod_labels(&a.name),
            "ports": [{ "name": "coordinator", "port": a.port, "targetPort": a.port, "protocol": "TCP" }],
        },
    })
}

/// What the pod gets besides the flags.
struct PodInputs<'a> {
    /// The join secret's Secret.
    secret: &'a str,
    /// The API key's Secret, when the shards need one.
    api_key: Option<&'a str>,
    coordinator: &'a str,
    resources: Value,
}

/// The container's environment: the secrets by reference only, the result
/// file and the keep time for the script, and every place a program may
/// write pointed at the writable /tmp volume.
fn env(a: &K8sArgs, flags: &BenchFlags, pod: &PodInputs<'_>) -> Value {
    let secret_ref =
        |name: &str, key: &str| json!({ "secretKeyRef": { "name": name, "key": key } });
    let mut env = vec![
        json!({ "name": SECRET_ENV, "valueFrom": secret_ref(pod.secret, SECRET_KEY) }),
        json!({ "name": "LDB_RESULT_FILE", "value": result_file(&flags.words) }),
        json!({ "name": "LDB_KEEP_SECONDS", "value": keep_seconds(a).to_string() }),
        json!({ "name": "HOME", "value": TMP_DIR }),
        json!({ "name": "TMPDIR", "value": TMP_DIR }),
        json!({ "name": "XDG_CACHE_HOME", "value": format!("{TMP_DIR}/.cache") }),
    ];
    if let Some(k) = pod.api_key {
        env.push(json!({ "name": API_KEY_ENV, "valueFrom": secret_ref(k, API_KEY_KEY) }));
    }
    Value::Array(env)
}

/// The Indexed Job: one pod per shard.
fn job(a: &K8sArgs, flags: &BenchFlags, pod: &PodInputs<'_>) -> Value {
    let volume = match &a.output_volume {
        Some(claim) => {
            json!({ "name": "results", "persistentVolumeClaim": { "claimName": claim } })
        }
        None => json!({ "name": "results", "emptyDir": {} }),
    };
    json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": a.name,
            "namespace": a.namespace,
            "labels": pod_labels(&a.name),
        },
        "spec": {
            "completionMode": "Indexed",
            "completions": a.shards,
            "parallelism": a.shards,
            // A replaced pod would join late and be refused, so a failed
            // shard is not retried; per index, so that one lost follower
            // does not end the others (the leader decides, --on-shard-loss).
            "backoffLimitPerIndex": 0,
            // a hung run cannot hold the cluster's resources for ever, and
            // a finished one is cleaned up after its logs have been read
            "activeDeadlineSeconds": a.deadline_seconds,
            "ttlSecondsAfterFinished": a.ttl_seconds,
            "template": {
                "metadata": { "labels": pod_labels(&a.name) },
                "spec": {
                    "subdomain": a.name,
                    "restartPolicy": "Never",
                    // the benchmark never talks to the Kubernetes API
                    "automountServiceAccountToken": false,
                    "securityContext": pod_security(),
                    "containers": [{
                        "name": "bench",
                        "image": a.image,
                        "workingDir": RESULTS_DIR,
                        "command": ["/bin/sh", "-c", container_script(a.shards, pod.coordinator), "llm-decode-bench"],
                        "args": flags.words,
                        "env": env(a, flags, pod),
                        "ports": [{ "name": "coordinator", "containerPort": a.port, "protocol": "TCP" }],
                        "resources": pod.resources,
                        "securityContext": container_security(),
                        "volumeMounts": [
                            { "name": "results", "mountPath": RESULTS_DIR },
                            { "name": "tmp", "mountPath": TMP_DIR },
                        ],
                    }],
                    "volumes": [volume, { "name": "tmp", "emptyDir": {} }],
                },
            },
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(flags: &[&str]) -> K8sArgs {
        K8sArgs {
            shards: 4,
            image: "registry.example/ldb:1".into(),
            name: "bench".into(),
            namespace: "perf".into(),
            secret_name: None,
            port: 29517,
            output_volume: None,
            keep_seconds: None,
            cluster_domain: "cluster.local".into(),
            api_key_secret: None,
            cpu_request: "2".into(),
            cpu_limit: "4".into(),
            memory_request: "2Gi".into(),
            memory_limit: "4Gi".into(),
            deadline_seconds: 21_600,
            ttl_seconds: 86_400,
            flags: flags.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn rendered(a: &K8sArgs) -> Result<String, AppError> {
        render(a, &super::super::flags::sort_out(&a.flags)?)
    }

    /// The Service, the NetworkPolicy and the Job, parsed back.
    fn docs(text: &str) -> Vec<Value> {
        text.split("\n---\n")
            .skip(1)
            .map(|d| serde_yaml_ng::from_str(d).unwrap())
            .collect()
    }

    #[test]
    fn the_job_names_shard_zero_under_the_headless_service() {
        let text = rendered(&args(&["--concurrency", "64"])).unwrap();
        let docs = docs(&text);
        let (svc, job) = (&docs[0], &docs[2]);
        assert_eq!(svc["spec"]["clusterIP"], "None");
        assert_eq!(svc["spec"]["selector"], pod_labels("bench"));
        let spec = &job["spec"];
        assert_eq!(spec["completionMode"], "Indexed");
        assert_eq!(
            (spec["completions"].as_u64(), spec["parallelism"].as_u64()),
            (Some(4), Some(4))
        );
        let pod = &spec["template"]["spec"];
        assert_eq!(pod["subdomain"], "bench");
        let c = &pod["containers"][0];
        assert!(
            c["command"][2]
                .as_str()
                .unwrap()
                .contains("--coordinator bench-0.bench.perf.svc.cluster.local:29517")
        );
        assert_eq!(c["args"], json!(["--concurrency", "64"]));
        assert_eq!(
            c["env"][0]["valueFrom"]["secretKeyRef"]["name"],
            "bench-shard-secret"
        );
        assert!(pod["volumes"][0].get("emptyDir").is_some());
        assert!(text.contains("kubectl -n perf create secret generic bench-shard-secret"));
    }

    #[test]
    fn the_pods_run_unprivileged_bounded_and_without_api_credentials() {
        let docs = docs(&rendered(&args(&[])).unwrap());
        let spec = &docs[2]["spec"];
        assert_eq!(spec["activeDeadlineSeconds"], 21_600);
        assert_eq!(spec["ttlSecondsAfterFinished"], 86_400);
        let pod = &spec["template"]["spec"];
        assert_eq!(pod["automountServiceAccountToken"], false);
        assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
        assert_eq!(pod["securityContext"]["runAsUser"], 65532);
        assert_eq!(
            pod["securityContext"]["seccompProfile"]["type"],
            "RuntimeDefault"
        );
        let c = &pod["containers"][0];
        let sc = &c["securityContext"];
        assert_eq!(sc["allowPrivilegeEscalation"], false);
        assert_eq!(sc["readOnlyRootFilesystem"], true);
        assert_eq!(sc["capabilities"]["drop"], json!(["ALL"]));
        assert_eq!(c["resources"]["requests"]["cpu"], "2");
        assert_eq!(c["resources"]["limits"]["memory"], "4Gi");
        // every path it writes is a volume: results and /tmp (HOME, TMPDIR)
        let mounts: Vec<&str> = c["volumeMounts"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|m| m["mountPath"].as_str())
            .collect();
        assert_eq!(mounts, [RESULTS_DIR, TMP_DIR]);
        let env = |n: &str| {
            c["env"]
                .as_array()
                .unwrap()
                .iter()
                .find(|e| e["name"] == n)
                .cloned()
        };
        assert_eq!(env("HOME").unwrap()["value"], TMP_DIR);
        assert_eq!(env("TMPDIR").unwrap()["value"], TMP_DIR);
    }

    #[test]
    fn the_coordinator_port_is_open_to_the_jobs_own_pods_only() {
        let docs = docs(&rendered(&args(&[])).unwrap());
        let (policy, job) = (&docs[1], &docs[2]);
        assert_eq!(policy["kind"], "NetworkPolicy");
        assert_eq!(
            policy["metadata"]["namespace"],
            job["metadata"]["namespace"]
        );
        let labels = job["spec"]["template"]["metadata"]["labels"]
            .as_object()
            .unwrap();
        // a selector matches a pod when each of its labels is the pod's
        let selects = |sel: &Value| {
            let m = sel["matchLabels"].as_object().unwrap();
            !m.is_empty() && m.iter().all(|(k, v)| labels.get(k) == Some(v))
        };
        let spec = &policy["spec"];
        assert!(selects(&spec["podSelector"]), "{policy}");
        assert_eq!(spec["policyTypes"], json!(["Ingress"]));
        let rules = spec["ingress"].as_array().unwrap();
        assert_eq!(rules.len(), 1);
        let from = rules[0]["from"].as_array().unwrap();
        assert_eq!(from.len(), 1);
        // pods of this namespace only (no namespaceSelector), of this Job only
        assert!(from[0].get("namespaceSelector").is_none() && selects(&from[0]["podSelector"]));
        // the instance label is what tells two Jobs' pods apart
        let mut other = args(&[]);
        other.name = "other".into();
        let other_job = &super::tests::docs(&rendered(&other).unwrap())[2];
        let other_labels = &other_job["spec"]["template"]["metadata"]["labels"];
        let m = from[0]["podSelector"]["matchLabels"].as_object().unwrap();
        assert!(m.iter().any(|(k, v)| other_labels[k] != *v));
        let port = &job["spec"]["template"]["spec"]["containers"][0]["ports"][0];
        assert_eq!(
            rules[0]["ports"],
            json!([{ "protocol": "TCP", "port": port["containerPort"] }])
        );
    }

    #[test]
    fn an_api_key_becomes_a_secret_reference_never_a_literal() {
        let text = rendered(&args(&["--api-k=sk-live-123", "--concurrency", "8"])).unwrap();
        assert!(!text.contains("sk-live-123"), "{text}");
        let c = &docs(&text)[2]["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(c["args"], json!(["--concurrency", "8"]));
        let key = c["env"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == API_KEY_ENV)
            .expect("the key's variable");
        assert_eq!(
            key["valueFrom"]["secretKeyRef"],
            json!({ "name": "bench-api-key", "key": API_KEY_KEY })
        );
        assert!(text.contains("create secret generic bench-api-key --from-literal=api-key="));
        // without a key, no reference
        assert!(!rendered(&args(&[])).unwrap().contains(API_KEY_ENV));
    }

    #[test]
    fn a_claim_replaces_the_empty_dir_and_bad_names_are_refused() {
        let mut a = args(&[]);
        a.output_volume = Some("results-pvc".into());
        let text = rendered(&a).unwrap();
        assert!(text.contains("claimName: results-pvc"));
        assert!(text.contains("LDB_KEEP_SECONDS\n") || text.contains("value: '0'"));
        a.name = "Bench_1".into();
        assert_eq!(rendered(&a).unwrap_err().exit_code(), 2);
    }

    #[test]
    fn limits_below_requests_and_deadlines_within_the_keep_time_are_refused() {
        let mut a = args(&[]);
        a.cpu_request = "8".into();
        assert!(
            rendered(&a)
                .unwrap_err()
                .to_string()
                .contains("above --cpu-limit")
        );
        let mut a = args(&[]);
        a.memory_limit = "lots".into();
        assert_eq!(rendered(&a).unwrap_err().exit_code(), 2);
        let mut a = args(&[]);
        a.deadline_seconds = 300;
        assert!(
            rendered(&a)
                .unwrap_err()
                .to_string()
                .contains("--deadline-seconds")
        );
    }
}
