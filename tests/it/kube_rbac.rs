//! docs/rbac.md lists exactly the rules the watchers need, and its ClusterRole
//! is the one generated from them.

use hcp_flow::sources::kube::config::WatchKind;
use hcp_flow::sources::kube::rbac::{cluster_role_yaml, markdown_rows, rbac_rules};

fn doc() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/rbac.md")).unwrap()
}

#[test]
fn rbac_md_table_lists_exactly_the_rules() {
    let doc = doc();
    let table: Vec<&str> = doc.lines().filter(|l| l.starts_with("| `")).collect();
    assert_eq!(
        table,
        markdown_rows(),
        "regenerate the table from rbac::markdown_rows()"
    );
}

#[test]
fn rbac_md_cluster_role_is_generated_from_the_rules() {
    let doc = doc();
    let yaml = doc
        .split("```yaml\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .unwrap();
    assert_eq!(
        yaml,
        cluster_role_yaml("hcp-flow"),
        "regenerate the ClusterRole from rbac::cluster_role_yaml()"
    );
}

#[test]
fn rules_cover_every_watched_kind_with_read_verbs_only() {
    let rules = rbac_rules();
    assert_eq!(rules.len(), WatchKind::ALL.len());
    for (_, _, verbs) in &rules {
        assert_eq!(
            verbs,
            &vec!["list", "watch"],
            "read-only, and only what a watcher issues"
        );
    }
}
