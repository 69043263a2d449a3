//! The tests of `fleet.rs`, apart so each file stays one a reviewer can hold.

use super::*;
use crate::model::testing::{batch, obs};
use crate::model::{Fleet, ModelConfig};

fn t(minutes: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + minutes * 60).unwrap()
}

fn lines<const N: usize>(
    family: Family<N>,
    observations: Vec<crate::model::testing::Obs>,
) -> Vec<String> {
    let mut fleet = Fleet::new(ModelConfig::default());
    fleet.apply(batch(false, t(0), observations), t(30));
    let rendered = render_cluster(fleet.get("c").unwrap(), &RenderConfig::default());
    let mut scratch = String::new();
    rendered
        .family_lines(family.id, &mut scratch)
        .lines()
        .map(str::to_string)
        .collect()
}

fn bundle(object: &str, phase: Phase, updated: i64) -> crate::model::testing::Obs {
    obs("c", Hop::MaestroBundle)
        .object(object)
        .state("x", phase)
        .created(t(0))
        .updated(t(updated))
}

/// Every family's lines carry `cluster_id` and then the declared labels
/// in their order; only the condition family leaves one out, and only
/// the ones it declares as optional.
#[test]
fn every_family_renders_the_labels_it_declares() {
    use crate::model::ConditionStatus;
    let mut fleet = Fleet::new(ModelConfig::default());
    let observations = vec![
        bundle("a", Phase::Ready, 1)
            .error("no_status", "bundle a has no status")
            .condition("Applied", ConditionStatus::True, "AsExpected", t(1)),
        bundle("b", Phase::Failed, 1).error("AppliedManifestWorkFailed", "apply failed"),
        obs("c", Hop::NodePool)
            .object("np-1")
            .state("Ready", Phase::Ready)
            .condition("Ready", ConditionStatus::True, "AsExpected", t(1))
            .replicas(3, 2, 1),
        obs("c", Hop::HostedCluster)
            .state("Available", Phase::Ready)
            .condition("Available", ConditionStatus::True, "AsExpected", t(1)),
        obs("c", Hop::ControlPlane)
            .state("Ready", Phase::Ready)
            .pods(4, 1),
        // A pool the RP shows provisioning: its creation in flight.
        obs("c", Hop::RpFrontend)
            .object("np-2")
            .state("Provisioning", Phase::Progressing)
            .created(t(0)),
        // One Clusters Service failed: its creation failed there.
        obs("c", Hop::ClustersService)
            .object("np-3")
            .state("error", Phase::Failed)
            .error("error", "quota exceeded"),
    ];
    fleet.apply(batch(false, t(0), observations), t(30));
    let mut timeline = fleet.get("c").unwrap().clone();
    // Both at once, which no real timeline is, so every family renders.
    timeline.completed_at = Some(t(20).into());
    timeline.outcome = crate::model::CreationOutcome::InFlight;
    let rendered = render_cluster(&timeline, &RenderConfig::default());
    let mut scratch = String::new();
    let mut left_out = BTreeSet::new();
    for family in all_families() {
        let text = rendered.family_lines(family.id, &mut scratch).to_string();
        assert!(!text.is_empty(), "{} rendered no line", family.name);
        let declared: Vec<&str> = family.label_names().collect();
        for line in text.lines() {
            let rest = line
                .strip_prefix(family.name)
                .and_then(|l| l.strip_prefix('{'))
                .unwrap_or_else(|| panic!("{line}"));
            let (labels, _) = rest.split_once("} ").unwrap();
            let names: Vec<&str> = labels
                .split("\",")
                .map(|kv| kv.split_once("=\"").unwrap().0)
                .collect();
            let mut wanted = declared.iter();
            for name in &names {
                assert!(
                    wanted.any(|d| d == name),
                    "{line}: {name} not declared, or out of order, in {declared:?}"
                );
            }
            for name in &declared {
                if !names.contains(name) {
                    left_out.insert((family.name, *name));
                }
            }
        }
    }
    assert_eq!(
        left_out,
        BTreeSet::from([
            (HOP_CONDITION.name, "node_pool"),
            (HOP_CONDITION.name, "object"),
        ])
    );
}

#[test]
fn a_family_written_directly_is_the_scratch_lines() {
    let mut fleet = Fleet::new(ModelConfig::default());
    let observations = vec![
        bundle("a", Phase::Ready, 1).error("no_status", "bundle a has no status"),
        bundle("b", Phase::Failed, 1).error("AppliedManifestWorkFailed", "apply failed"),
        obs("c", Hop::NodePool)
            .object("np-1")
            .state("Ready", Phase::Ready)
            .replicas(3, 2, 1),
    ];
    fleet.apply(batch(false, t(0), observations), t(30));
    let rendered = render_cluster(fleet.get("c").unwrap(), &RenderConfig::default());
    let mut scratch = String::new();
    let (mut empty, mut several) = (0, 0);
    for family in all_families() {
        let (index, id) = (family.name, family.id);
        let expected = rendered.family_lines(id, &mut scratch).to_string();
        // Appended after what is already there, as a body grows.
        let mut direct = String::from("before\n");
        rendered.write_family(id, &mut direct);
        assert_eq!(direct, format!("before\n{expected}"), "family {index}");
        let mut bytes = b"before\n".to_vec();
        rendered.write_family_bytes(id, &mut bytes);
        assert_eq!(bytes, direct.as_bytes(), "family {index}");
        assert_eq!(rendered.family_len(id), expected.len(), "family {index}");
        empty += usize::from(expected.is_empty());
        several += usize::from(expected.lines().count() > 1);
    }
    assert!(
        empty > 0 && several > 0,
        "{empty} empty, {several} of several lines"
    );
    assert_eq!(
        all_families()
            .iter()
            .map(|f| rendered.family_len(f.id))
            .sum::<usize>(),
        rendered.len()
    );
    assert_eq!(rendered.text().len(), rendered.len());
}

#[test]
fn read_ahead_hints_take_any_family_index_and_change_nothing() {
    let mut fleet = Fleet::new(ModelConfig::default());
    fleet.apply(
        batch(false, t(0), vec![bundle("a", Phase::Ready, 1)]),
        t(30),
    );
    let rendered = render_cluster(fleet.get("c").unwrap(), &RenderConfig::default());
    // An index past the families, and a cluster with no text at all:
    // a hint is asked for only where there are bytes and never panics,
    // and the lines read afterwards are the same.
    for cluster in [&rendered, &RenderedCluster::default()] {
        for index in 0..FAMILY_COUNT + 2 {
            let id = FamilyId(u8::try_from(index).unwrap());
            cluster.prefetch_fields(id);
            cluster.prefetch_family(id);
        }
    }
    let mut scratch = String::new();
    let written: String = all_families()
        .iter()
        .map(|f| rendered.family_lines(f.id, &mut scratch).to_string())
        .collect();
    assert_eq!(written, rendered.text());
}

#[test]
fn a_frozen_bundle_shows_though_another_keeps_reporting() {
    // The pool's bundle stopped at minute 2; the HostedCluster's reports
    // until minute 20. The alert must see minute 2.
    let got = lines(
        HOP_STATUS_UPDATED,
        vec![
            bundle("hc", Phase::Progressing, 20),
            bundle("np-1", Phase::Progressing, 2),
        ],
    );
    assert_eq!(got.len(), 1, "one series per hop: {got:?}");
    assert!(got[0].ends_with(&format!(" {}", seconds(t(2)))), "{got:?}");
    // A ready bundle's old update is no news: the one not ready counts.
    let got = lines(
        HOP_STATUS_UPDATED,
        vec![
            bundle("hc", Phase::Ready, 1),
            bundle("np-1", Phase::Progressing, 9),
        ],
    );
    assert!(got[0].ends_with(&format!(" {}", seconds(t(9)))), "{got:?}");
    // All ready: the newest update.
    let got = lines(
        HOP_STATUS_UPDATED,
        vec![
            bundle("hc", Phase::Ready, 1),
            bundle("np-1", Phase::Ready, 9),
        ],
    );
    assert!(got[0].ends_with(&format!(" {}", seconds(t(9)))), "{got:?}");
}

#[test]
fn a_failed_hop_names_the_failure_not_a_feedback_error() {
    let got = lines(
        HOP_FAILURE_INFO,
        vec![
            bundle("a", Phase::Ready, 1).error("no_status", "bundle a has no status"),
            bundle("b", Phase::Failed, 1).error("AppliedManifestWorkFailed", "apply failed"),
        ],
    );
    assert_eq!(
        got,
        vec![
            r#"hcpflow_hop_failure_info{cluster_id="c",hop="maestro_bundle",code="AppliedManifestWorkFailed"} 1"#
        ]
    );
    let got = lines(
        HOP_FEEDBACK_ERROR,
        vec![
            bundle("a", Phase::Ready, 1).error("no_status", "bundle a has no status"),
            bundle("b", Phase::Failed, 1).error("AppliedManifestWorkFailed", "apply failed"),
        ],
    );
    assert_eq!(
        got,
        vec![
            r#"hcpflow_hop_feedback_error_info{cluster_id="c",hop="maestro_bundle",object="a",code="no_status"} 1"#
        ],
        "only the closed set of feedback codes, never a failure code"
    );
}
