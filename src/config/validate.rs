//! Semantic checks of a parsed configuration, each problem at its key path.

use std::collections::BTreeSet;
use std::fs::File;
use std::io::Read;
use std::path::Path;
use std::time::Duration;

use super::error::FieldError;
use super::types::{
    Auth, Config, HttpSourceConfig, KubeMode, KubeSourceConfig, MaestroGrpcConfig,
    RpFrontendConfig, SOURCE_CLUSTERS_SERVICE, SOURCE_KUBE, SOURCE_MAESTRO, SOURCE_RP_FRONTEND,
    TRACE_ID_PLACEHOLDER, UiConfig, default_rp_api_version, defaults, join_hops,
};

impl Config {
    /// Every semantic problem, each with its key path. Checks that files
    /// named by the config exist and are readable, so it touches the
    /// filesystem (never reads a token).
    pub fn validate(&self) -> Vec<FieldError> {
        self.validate_checking_sources(true)
    }

    /// [`Config::validate`]; with `sources_complete` false (a source section
    /// did not parse, and that error is already reported) the checks that
    /// depend on which sources exist are skipped, since they would only
    /// repeat it in a misleading form ("no source configured").
    pub(super) fn validate_checking_sources(&self, sources_complete: bool) -> Vec<FieldError> {
        let mut errors = Vec::new();

        if self.slo.creation_target.is_zero() {
            errors.push(FieldError::new(
                "slo.creation_target",
                "must be longer than 0s",
            ));
        }
        for (hop, budget) in self.slo.hop_budgets.iter() {
            if budget.is_zero() {
                errors.push(FieldError::new(
                    format!("slo.hop_budgets.{hop}"),
                    "must be longer than 0s",
                ));
            }
        }
        let operations = &self.slo.operations;
        for (name, target, budgets) in [
            (
                "delete",
                operations.delete.target,
                &operations.delete.hop_budgets,
            ),
            (
                "upgrade",
                operations.upgrade.target,
                &operations.upgrade.hop_budgets,
            ),
        ] {
            if target.is_zero() {
                errors.push(FieldError::new(
                    format!("slo.operations.{name}.target"),
                    "must be longer than 0s",
                ));
            }
            for (hop, budget) in budgets {
                if budget.is_zero() {
                    errors.push(FieldError::new(
                        format!("slo.operations.{name}.hop_budgets.{hop}"),
                        "must be longer than 0s",
                    ));
                }
            }
        }
        for (key, target) in [
            (
                "slo.operations.node_pool_create.target",
                self.slo.operations.node_pool_create.target,
            ),
            (
                "slo.operations.node_pool_delete.target",
                self.slo.operations.node_pool_delete.target,
            ),
            (
                "slo.operations.node_pool_upgrade.target",
                self.slo.operations.node_pool_upgrade.target,
            ),
        ] {
            if target.is_zero() {
                errors.push(FieldError::new(key, "must be longer than 0s"));
            }
        }
        let observable = self.observable_hops();
        let mut seen = BTreeSet::new();
        for (i, hop) in self.slo.terminal_hops.iter().enumerate() {
            let path = format!("slo.terminal_hops[{i}]");
            if !seen.insert(*hop) {
                errors.push(FieldError::new(path, format!("{hop} is listed twice")));
            } else if sources_complete && !self.sources.is_empty() && !observable.contains(hop) {
                errors.push(FieldError::new(
                    path,
                    format!(
                        "no configured source observes {hop}, so no creation could ever \
                         complete; observed hops: {}",
                        join_hops(&observable)
                    ),
                ));
            }
        }

        // Only the shape is checked here: whether the directory can be
        // written is proven when `serve` opens it (docs/design/03-timeline-model.md §3.8), so
        // check-config works on a machine without the volume.
        if let Some(dir) = &self.state_dir {
            if dir.as_os_str().is_empty() {
                errors.push(FieldError::new(
                    "state_dir",
                    "must name a directory (leave it out to keep no state)",
                ));
            } else if dir.exists() && !dir.is_dir() {
                errors.push(FieldError::new(
                    "state_dir",
                    format!("{} exists and is not a directory", dir.display()),
                ));
            }
        }

        if self.shard.total == 0 {
            errors.push(FieldError::new("shard.total", "must be at least 1"));
        } else if self.shard.index >= self.shard.total {
            errors.push(FieldError::new(
                "shard.index",
                format!(
                    "is {} but shards are numbered 0 to {} (shard.total is {})",
                    self.shard.index,
                    self.shard.total - 1,
                    self.shard.total
                ),
            ));
        }

        if sources_complete && self.sources.is_empty() {
            errors.push(FieldError::new(
                "sources",
                "no source configured: set at least one of sources.rp_frontend, \
                 sources.clusters_service, sources.maestro, sources.kube (or a \
                 --<source>-base-url, --kube-contexts, --kubeconfig or --kube-in-cluster flag)",
            ));
        }
        validate_kube(&self.sources.kube, &mut errors);
        if let Some(rp) = &self.sources.rp_frontend {
            validate_http(
                &format!("sources.{SOURCE_RP_FRONTEND}"),
                &rp.http,
                &mut errors,
            );
            validate_rp(rp, &mut errors);
        }
        if let Some(cs) = &self.sources.clusters_service {
            validate_http(
                &format!("sources.{SOURCE_CLUSTERS_SERVICE}"),
                &cs.http,
                &mut errors,
            );
        }
        if let Some(m) = &self.sources.maestro {
            validate_http(&format!("sources.{SOURCE_MAESTRO}"), &m.http, &mut errors);
            if let Some(grpc) = &m.grpc {
                validate_grpc(&format!("sources.{SOURCE_MAESTRO}.grpc"), grpc, &mut errors);
            }
        }
        validate_ui(&self.ui, &mut errors);
        errors
    }
}

/// The UI's links are opened by a browser: anything but an absolute http(s)
/// URL would be a dead (or a `javascript:`) link on every cluster page.
fn validate_ui(ui: &UiConfig, errors: &mut Vec<FieldError>) {
    if let Some(template) = &ui.trace_url_template {
        let path = "ui.trace_url_template";
        if !template.contains(TRACE_ID_PLACEHOLDER) {
            errors.push(FieldError::new(
                path,
                format!(
                    "must contain {TRACE_ID_PLACEHOLDER}, where the creation's trace id goes \
                     (e.g. https://jaeger.example/trace/{TRACE_ID_PLACEHOLDER})"
                ),
            ));
        } else {
            let example =
                template.replace(TRACE_ID_PLACEHOLDER, "0123456789abcdef0123456789abcdef");
            match url::Url::parse(&example) {
                Ok(u) if matches!(u.scheme(), "http" | "https") => {}
                Ok(u) => errors.push(FieldError::new(
                    path,
                    format!("must be an http or https URL, not {}", u.scheme()),
                )),
                Err(e) => errors.push(FieldError::new(
                    path,
                    format!("is not a URL once the trace id is filled in: {e}"),
                )),
            }
        }
    }
    if let Some(url) = &ui.grafana_url
        && !matches!(url.scheme(), "http" | "https")
    {
        errors.push(FieldError::new(
            "ui.grafana_url",
            format!("must be an http or https URL, not {}", url.scheme()),
        ));
    }
}

fn validate_http(prefix: &str, http: &HttpSourceConfig, errors: &mut Vec<FieldError>) {
    let url = &http.base_url;
    if url.scheme() != "http" && url.scheme() != "https" {
        errors.push(FieldError::new(
            format!("{prefix}.base_url"),
            format!(
                "scheme must be http or https, not `{}` (in {url})",
                url.scheme()
            ),
        ));
    } else if url.host_str().is_none_or(str::is_empty) {
        errors.push(FieldError::new(
            format!("{prefix}.base_url"),
            format!("{url} has no host"),
        ));
    }
    if url.query().is_some() || url.fragment().is_some() {
        errors.push(FieldError::new(
            format!("{prefix}.base_url"),
            format!("{url} must not carry a query or fragment; the exporter builds its own"),
        ));
    }

    if let Some(at) = api_path_in(url) {
        let path = url.path().trim_end_matches('/');
        let api_path = &path[at..];
        let mut fixed = url.clone();
        fixed.set_path(if at == 0 { "/" } else { &path[..at] });
        errors.push(FieldError::new(
            format!("{prefix}.base_url"),
            format!(
                "{url} already ends in the API path `{api_path}`, which the exporter \
                 appends itself; set base_url to {fixed}"
            ),
        ));
    }

    if http.timeout.is_zero() {
        errors.push(FieldError::new(
            format!("{prefix}.timeout"),
            "must be longer than 0s",
        ));
    }
    if http.connect_timeout.is_zero() {
        errors.push(FieldError::new(
            format!("{prefix}.connect_timeout"),
            "must be longer than 0s",
        ));
    } else if http.connect_timeout > http.timeout
        && !http.timeout.is_zero()
        // Left at its default, the connect deadline just shrinks to a
        // shorter `timeout` (the client uses the smaller of the two).
        && http.connect_timeout != super::types::defaults::connect_timeout()
    {
        errors.push(FieldError::new(
            format!("{prefix}.connect_timeout"),
            format!(
                "is {} but must not be longer than timeout ({}), the deadline of the \
                 whole request",
                humantime::format_duration(http.connect_timeout),
                humantime::format_duration(http.timeout),
            ),
        ));
    }
    if http.page_size == 0 || http.page_size > defaults::MAX_PAGE_SIZE {
        errors.push(FieldError::new(
            format!("{prefix}.page_size"),
            format!(
                "is {} but must be between 1 and {}",
                http.page_size,
                defaults::MAX_PAGE_SIZE
            ),
        ));
    }

    let intervals = [
        ("fast_poll_interval", http.fast_poll_interval),
        ("slow_poll_interval", http.slow_poll_interval),
        ("full_relist_interval", http.full_relist_interval),
    ];
    for (key, value) in intervals {
        if value.is_zero() {
            errors.push(FieldError::new(
                format!("{prefix}.{key}"),
                "must be longer than 0s",
            ));
        }
    }
    // In-flight clusters are polled at least as often as settled ones, and a
    // full relist is the slowest loop; anything else is a typo.
    for pair in intervals.windows(2) {
        let [(fast_key, fast), (slow_key, slow)] = pair else {
            continue;
        };
        if !fast.is_zero() && !slow.is_zero() && fast > slow {
            errors.push(FieldError::new(
                format!("{prefix}.{fast_key}"),
                format!(
                    "is {} but must not be longer than {slow_key} ({}); \
                     required: fast_poll_interval <= slow_poll_interval <= full_relist_interval",
                    humantime::format_duration(*fast),
                    humantime::format_duration(*slow),
                ),
            ));
        }
    }

    if let Some(ca) = &http.ca_file
        && let Err(message) = check_ca_file(ca)
    {
        errors.push(FieldError::new(format!("{prefix}.ca_file"), message));
    }
    if let Auth::BearerTokenFile(token) = &http.auth
        && let Err(message) = check_readable_file(token)
    {
        errors.push(FieldError::new(
            format!("{prefix}.auth.bearer_token_file"),
            message,
        ));
    }
}

/// API paths the sources append to `base_url` themselves; a base URL that
/// ends in one (copied from a browser or a curl line) doubles it.
const API_PATHS: [&str; 4] = [
    "/api/clusters_mgmt/v1",
    "/api/aro_hcp/v1alpha1",
    "/api/maestro/v1",
    "/subscriptions",
];

/// Where in `url`'s path (trailing `/` trimmed) an API path starts, if the
/// path ends in one (an ARM URL may go on into `/subscriptions/<id>/...`).
fn api_path_in(url: &url::Url) -> Option<usize> {
    let lower = url.path().trim_end_matches('/').to_ascii_lowercase();
    API_PATHS.iter().find_map(|api| {
        if lower.ends_with(api) {
            Some(lower.len() - api.len())
        } else if *api == "/subscriptions" {
            lower.find("/subscriptions/")
        } else {
            None
        }
    })
}

fn validate_rp(rp: &RpFrontendConfig, errors: &mut Vec<FieldError>) {
    let prefix = format!("sources.{SOURCE_RP_FRONTEND}");
    // The ARM list of hcpOpenShiftClusters declares no `$top`: pages are the
    // RP's, followed by `nextLink` (docs/design/13-decisions.md §13.7). A setting that
    // would change nothing is refused rather than silently ignored.
    if rp.http.page_size != super::types::defaults::page_size() {
        errors.push(FieldError::new(
            format!("{prefix}.page_size"),
            "the RP frontend's list takes no page size (its pages follow nextLink); remove the setting"
                .to_string(),
        ));
    }
    if !is_api_version(&rp.api_version) {
        errors.push(FieldError::new(
            format!("{prefix}.api_version"),
            format!(
                "`{}` is not an ARM api-version (YYYY-MM-DD or YYYY-MM-DD-preview, e.g. {})",
                rp.api_version,
                default_rp_api_version()
            ),
        ));
    }
    if rp.subscriptions.is_empty() && rp.resource_ids.is_empty() {
        errors.push(FieldError::new(
            prefix.clone(),
            "nothing to read: set subscriptions (listed) and/or resource_ids (fetched one by one)",
        ));
    }
    for (i, sub) in rp.subscriptions.iter().enumerate() {
        if !is_guid(sub) {
            errors.push(FieldError::new(
                format!("{prefix}.subscriptions[{i}]"),
                format!("`{sub}` is not a subscription id (a GUID such as 6b690bec-0c16-4ecb-8f67-781caf40bba7)"),
            ));
        }
    }
    for (i, id) in rp.resource_ids.iter().enumerate() {
        if let Err(why) = check_cluster_resource_id(id) {
            errors.push(FieldError::new(
                format!("{prefix}.resource_ids[{i}]"),
                format!(
                    "`{id}` is not an hcpOpenShiftClusters resource id ({why}); expected \
                     /subscriptions/<guid>/resourceGroups/<group>/providers/\
                     Microsoft.RedHatOpenShift/hcpOpenShiftClusters/<name>"
                ),
            ));
        }
    }
}

/// `sources.maestro.grpc` (docs/design/09b-reading-the-upstreams.md §9.10).
fn validate_grpc(prefix: &str, grpc: &MaestroGrpcConfig, errors: &mut Vec<FieldError>) {
    let address = &grpc.address;
    let mut err = |key: &str, message: String| {
        errors.push(FieldError::new(format!("{prefix}.{key}"), message));
    };
    if address.scheme() != "http" && address.scheme() != "https" {
        err(
            "address",
            format!(
                "scheme must be http (plaintext) or https (TLS 1.3), not `{}`",
                address.scheme()
            ),
        );
    } else if address.host_str().is_none_or(str::is_empty) {
        err("address", format!("{address} has no host"));
    }
    if !matches!(address.path(), "" | "/") || address.query().is_some() {
        err(
            "address",
            format!("{address} must be scheme, host and port only"),
        );
    }
    if grpc.source_id.trim().is_empty() {
        err(
            "source_id",
            "must name the source the bundles were created by".to_string(),
        );
    }
    let credentials = grpc.bearer_token_file.is_some()
        || grpc.client_cert_file.is_some()
        || grpc.client_key_file.is_some()
        || grpc.ca_file.is_some();
    if credentials && !grpc.tls() {
        err(
            "address",
            "a token, client certificate or CA needs TLS: an https address (Maestro \
             authenticates only over TLS)"
                .to_string(),
        );
    }
    if grpc.bearer_token_file.is_some() && grpc.client_cert_file.is_some() {
        err(
            "bearer_token_file",
            "set a bearer token or a client certificate, not both".to_string(),
        );
    }
    if grpc.client_cert_file.is_some() != grpc.client_key_file.is_some() {
        err(
            "client_key_file",
            "client_cert_file and client_key_file go together".to_string(),
        );
    }
    for (key, path) in [
        ("bearer_token_file", &grpc.bearer_token_file),
        ("client_cert_file", &grpc.client_cert_file),
        ("client_key_file", &grpc.client_key_file),
    ] {
        if let Some(path) = path
            && let Err(e) = check_readable_file(path)
        {
            err(key, e);
        }
    }
    if let Some(path) = &grpc.ca_file
        && let Err(e) = check_ca_file(path)
    {
        err("ca_file", e);
    }
    for (key, d) in [
        ("heartbeat_timeout", grpc.heartbeat_timeout),
        ("connect_timeout", grpc.connect_timeout),
        ("reconnect_backoff", grpc.reconnect_backoff),
    ] {
        if d.is_zero() {
            err(key, "must be > 0".to_string());
        }
    }
}

fn check_readable_file(path: &Path) -> Result<File, String> {
    let file = File::open(path).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    match file.metadata() {
        Ok(meta) if meta.is_dir() => Err(format!("{} is a directory, not a file", path.display())),
        Ok(_) => Ok(file),
        Err(e) => Err(format!("cannot inspect {}: {e}", path.display())),
    }
}

fn check_ca_file(path: &Path) -> Result<(), String> {
    let mut file = check_readable_file(path)?;
    // A CA bundle is public data; reading it here catches the common mistake
    // of pointing at a key or a DER file before the first poll fails on it.
    let mut text = String::new();
    file.by_ref()
        .take(16 * 1024 * 1024)
        .read_to_string(&mut text)
        .map_err(|e| format!("cannot read {} as PEM text: {e}", path.display()))?;
    if !text.contains("-----BEGIN CERTIFICATE-----") {
        return Err(format!(
            "{} holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
            path.display()
        ));
    }
    Ok(())
}

fn is_api_version(v: &str) -> bool {
    let date = v.strip_suffix("-preview").unwrap_or(v);
    let b = date.as_bytes();
    b.len() == 10
        && b[4] == b'-'
        && b[7] == b'-'
        && b.iter()
            .enumerate()
            .all(|(i, c)| i == 4 || i == 7 || c.is_ascii_digit())
}

/// ARM subscription ids are GUIDs: 8-4-4-4-12 hex digits.
pub fn is_guid(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 36
        && b.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            _ => c.is_ascii_hexdigit(),
        })
}

/// Checks the shape of an hcpOpenShiftClusters resource id. ARM compares the
/// fixed segments case-insensitively, and so does this.
pub fn check_cluster_resource_id(id: &str) -> Result<(), &'static str> {
    let Some(rest) = id.strip_prefix('/') else {
        return Err("it must start with /subscriptions/");
    };
    let parts: Vec<&str> = rest.split('/').collect();
    let [subs, sub, rgs, rg, providers, namespace, kind, name] = parts.as_slice() else {
        return Err("wrong number of path segments");
    };
    if !subs.eq_ignore_ascii_case("subscriptions") || !is_guid(sub) {
        return Err("it must start with /subscriptions/<guid>");
    }
    if !rgs.eq_ignore_ascii_case("resourceGroups") || rg.is_empty() {
        return Err("the resource group segment is missing");
    }
    if !providers.eq_ignore_ascii_case("providers")
        || !namespace.eq_ignore_ascii_case("Microsoft.RedHatOpenShift")
        || !kind.eq_ignore_ascii_case("hcpOpenShiftClusters")
    {
        return Err("the provider must be Microsoft.RedHatOpenShift/hcpOpenShiftClusters");
    }
    if name.is_empty() {
        return Err("the cluster name is missing");
    }
    Ok(())
}

/// A `mgmt_cluster` is a label value and part of the source name: short,
/// and made of the characters Kubernetes allows in names.
fn check_mgmt_cluster(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err(
            "required: the management cluster's name (the mgmt_cluster label \
                    value); set it, or a context whose name is used"
                .to_string(),
        );
    }
    if name.len() > 253 {
        return Err(format!("is {} characters long; at most 253", name.len()));
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        return Err(format!(
            "`{name}` may only hold letters, digits, `-`, `_` and `.`"
        ));
    }
    Ok(())
}

fn validate_kube(list: &[KubeSourceConfig], errors: &mut Vec<FieldError>) {
    let mut seen: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    for (i, k) in list.iter().enumerate() {
        let prefix = format!("sources.{SOURCE_KUBE}[{i}]");
        let at = |key: &str| format!("{prefix}.{key}");
        if let Err(message) = check_mgmt_cluster(&k.mgmt_cluster) {
            errors.push(FieldError::new(at("mgmt_cluster"), message));
        } else if let Some(first) = seen.insert(&k.mgmt_cluster, i) {
            seen.insert(&k.mgmt_cluster, first);
            errors.push(FieldError::new(
                at("mgmt_cluster"),
                format!(
                    "`{}` is also sources.kube[{first}]; each management cluster needs its own \
                     name (it is the mgmt_cluster label and the source kube/<name>)",
                    k.mgmt_cluster
                ),
            ));
        }
        if k.in_cluster && (k.kubeconfig.is_some() || k.context.is_some()) {
            errors.push(FieldError::new(
                at("in_cluster"),
                "in_cluster uses the pod's service account; leave kubeconfig and context unset",
            ));
        }
        if !k.in_cluster
            && let Some(path) = &k.kubeconfig
        {
            match check_readable_file(path) {
                Err(message) => errors.push(FieldError::new(at("kubeconfig"), message)),
                Ok(_) => match kube::config::Kubeconfig::read_from(path) {
                    Err(e) => errors.push(FieldError::new(
                        at("kubeconfig"),
                        format!("{} is not a kubeconfig: {e}", path.display()),
                    )),
                    Ok(file) => {
                        let names: Vec<&str> =
                            file.contexts.iter().map(|c| c.name.as_str()).collect();
                        match &k.context {
                            Some(context) if !names.contains(&context.as_str()) => {
                                errors.push(FieldError::new(
                                    at("context"),
                                    format!(
                                        "no context `{context}` in {} (it has: {})",
                                        path.display(),
                                        if names.is_empty() {
                                            "none".to_string()
                                        } else {
                                            names.join(", ")
                                        }
                                    ),
                                ))
                            }
                            None if file.current_context.as_deref().is_none_or(str::is_empty) => {
                                errors.push(FieldError::new(
                                    at("context"),
                                    format!(
                                        "{} has no current-context; name the context to use",
                                        path.display()
                                    ),
                                ))
                            }
                            _ => {}
                        }
                    }
                },
            }
        }
        if k.context.as_deref() == Some("") {
            errors.push(FieldError::new(at("context"), "must not be empty"));
        }
        if k.mode == KubeMode::Aro && k.environment.trim().is_empty() {
            errors.push(FieldError::new(
                at("environment"),
                "required in aro mode: the <env> of ocm-<env>-<id> namespaces (e.g. int, stg, \
                 prod); without it control planes cannot be matched to their clusters",
            ));
        }
        if k.environment
            .contains(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        {
            errors.push(FieldError::new(
                at("environment"),
                format!(
                    "`{}` cannot be part of a namespace name (letters, digits, `-`)",
                    k.environment
                ),
            ));
        }
        for (key, value) in [
            ("manifestwork_label", &k.manifestwork_label),
            ("name_label", &k.name_label),
            ("control_plane_pod_label", &k.control_plane_pod_label),
        ] {
            if value.trim().is_empty() {
                errors.push(FieldError::new(at(key), "must not be empty"));
            }
        }
        if k.watch.as_ref().is_some_and(Vec::is_empty) {
            errors.push(FieldError::new(
                at("watch"),
                "is an empty list; leave it out to watch the mode's default kinds",
            ));
        }
        for (key, value) in [
            ("min_backoff", k.min_backoff),
            ("max_backoff", k.max_backoff),
        ] {
            if value.is_zero() {
                errors.push(FieldError::new(at(key), "must be longer than 0s"));
            }
        }
        if k.watch_timeout < Duration::from_secs(1) {
            errors.push(FieldError::new(
                at("watch_timeout"),
                "must be at least 1s (the API server counts it in whole seconds)",
            ));
        }
        if k.idle_timeout < Duration::from_secs(1) {
            errors.push(FieldError::new(
                at("idle_timeout"),
                "must be at least 1s (shorter than a bookmark period, every quiet watch would look hung)",
            ));
        }
        if !k.min_backoff.is_zero() && k.min_backoff > k.max_backoff {
            errors.push(FieldError::new(
                at("min_backoff"),
                format!(
                    "is {} but must not be longer than max_backoff ({})",
                    humantime::format_duration(k.min_backoff),
                    humantime::format_duration(k.max_backoff)
                ),
            ));
        }
        if k.page_size == 0 || k.page_size > defaults::MAX_PAGE_SIZE {
            errors.push(FieldError::new(
                at("page_size"),
                format!(
                    "is {} but must be between 1 and {}",
                    k.page_size,
                    defaults::MAX_PAGE_SIZE
                ),
            ));
        }
    }
}
