//! The exact RBAC the watchers need: list and watch of the watched kinds,
//! nothing else. `docs/rbac.md` is generated from (and tested against) these rows.

use crate::config::kube::kinds::KINDS;

pub const VERBS: [&str; 2] = ["list", "watch"];

/// One row per (group, resource), every kind any mode watches, read from
/// the table of watched kinds.
pub fn rbac_rules() -> Vec<(&'static str, &'static str, Vec<&'static str>)> {
    let mut rows: Vec<_> = KINDS
        .iter()
        .map(|spec| (spec.group, spec.plural, VERBS.to_vec()))
        .collect();
    rows.sort();
    rows
}

/// The rules as a ClusterRole manifest (what `docs/rbac.md` shows).
pub fn cluster_role_yaml(name: &str) -> String {
    let mut out = format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: {name}\nrules:\n"
    );
    for (group, resource, verbs) in rbac_rules() {
        out.push_str(&format!(
            "  - apiGroups: [\"{group}\"]\n    resources: [\"{resource}\"]\n    verbs: [{}]\n",
            verbs
                .iter()
                .map(|v| format!("\"{v}\""))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    out
}

/// The markdown table rows of `docs/rbac.md`.
pub fn markdown_rows() -> Vec<String> {
    rbac_rules()
        .into_iter()
        .map(|(group, resource, verbs)| {
            let group = if group.is_empty() {
                "`\"\"` (core)".to_string()
            } else {
                format!("`{group}`")
            };
            format!("| {group} | `{resource}` | {} |", verbs.join(", "))
        })
        .collect()
}
