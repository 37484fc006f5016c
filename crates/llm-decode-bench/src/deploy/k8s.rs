//! `deploy k8s`: a headless Service and an Indexed Job, as YAML.
//!
//! Kubernetes gives each pod of an Indexed Job its index in
//! `JOB_COMPLETION_INDEX` (the shards' default `--shard-index`) and the
//! hostname `NAME-INDEX`; with `subdomain` set to a headless Service of the
//! same pods, shard 0 is reachable at `NAME-0.NAME.NS.svc.DOMAIN`, which is
//! the coordinator every shard is given. The objects are built as JSON values
//! and printed by a YAML serializer, so quoting is never done by hand.

use serde_json::{Value, json};

use super::{K8sArgs, SECRET_ENV, check_dns_label, result_file, shell_quote};
use crate::error::AppError;

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

/// The Service, the Job, and a comment header on how to make the Secret
/// and collect the result.
pub fn render(a: &K8sArgs) -> Result<String, AppError> {
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
    let coordinator = format!(
        "{name}-0.{name}.{ns}.svc.{domain}:{port}",
        name = a.name,
        ns = a.namespace,
        domain = a.cluster_domain,
        port = a.port
    );
    let header = header(a, &secret);
    let service = service(a);
    let job = job(a, &secret, &coordinator);
    let yaml = |v: &Value| {
        serde_yaml_ng::to_string(v)
            .map_err(|e| AppError::Output(format!("cannot render the manifest as YAML: {e}")))
    };
    Ok(format!(
        "{header}---\n{}---\n{}",
        yaml(&service)?,
        yaml(&job)?
    ))
}

/// YAML comments: the Secret to create first (its value is never printed
/// here), how to apply, watch and collect.
fn header(a: &K8sArgs, secret: &str) -> String {
    let ns = &a.namespace;
    let result = result_file(&a.flags);
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
            "labels": { "app.kubernetes.io/name": "llm-decode-bench" },
        },
        "spec": {
            "clusterIP": "None",
            // the coordinator must resolve before any pod is Ready
            "publishNotReadyAddresses": true,
            "selector": { "job-name": a.name },
            "ports": [{ "name": "coordinator", "port": a.port, "targetPort": a.port, "protocol": "TCP" }],
        },
    })
}

/// The Indexed Job: one pod per shard.
fn job(a: &K8sArgs, secret: &str, coordinator: &str) -> Value {
    let keep = a
        .keep_seconds
        .unwrap_or(if a.output_volume.is_some() { 0 } else { 300 });
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
            "labels": { "app.kubernetes.io/name": "llm-decode-bench" },
        },
        "spec": {
            "completionMode": "Indexed",
            "completions": a.shards,
            "parallelism": a.shards,
            // A replaced pod would join late and be refused, so a failed
            // shard is not retried; per index, so that one lost follower
            // does not end the others (the leader decides, --on-shard-loss).
            "backoffLimitPerIndex": 0,
            "template": {
                "metadata": { "labels": { "app.kubernetes.io/name": "llm-decode-bench" } },
                "spec": {
                    "subdomain": a.name,
                    "restartPolicy": "Never",
                    "containers": [{
                        "name": "bench",
                        "image": a.image,
                        "workingDir": RESULTS_DIR,
                        "command": ["/bin/sh", "-c", container_script(a.shards, coordinator), "llm-decode-bench"],
                        "args": a.flags,
                        "env": [
                            { "name": SECRET_ENV, "valueFrom": { "secretKeyRef": { "name": secret, "key": SECRET_KEY } } },
                            { "name": "LDB_RESULT_FILE", "value": result_file(&a.flags) },
                            { "name": "LDB_KEEP_SECONDS", "value": keep.to_string() },
                        ],
                        "ports": [{ "name": "coordinator", "containerPort": a.port, "protocol": "TCP" }],
                        "volumeMounts": [{ "name": "results", "mountPath": RESULTS_DIR }],
                    }],
                    "volumes": [volume],
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
            flags: flags.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn the_job_names_shard_zero_under_the_headless_service() {
        let text = render(&args(&["--concurrency", "64"])).unwrap();
        let docs: Vec<Value> = text
            .split("\n---\n")
            .skip(1)
            .map(|d| serde_yaml_ng::from_str(d).unwrap())
            .collect();
        let (svc, job) = (&docs[0], &docs[1]);
        assert_eq!(svc["spec"]["clusterIP"], "None");
        assert_eq!(svc["spec"]["selector"]["job-name"], "bench");
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
    fn a_claim_replaces_the_empty_dir_and_bad_names_are_refused() {
        let mut a = args(&[]);
        a.output_volume = Some("results-pvc".into());
        let text = render(&a).unwrap();
        assert!(text.contains("claimName: results-pvc"));
        assert!(text.contains("LDB_KEEP_SECONDS\n") || text.contains("value: '0'"));
        a.name = "Bench_1".into();
        assert_eq!(render(&a).unwrap_err().exit_code(), 2);
    }
}
