//! A condition as the model keeps it: what it says (type, status, reason,
//! message) shared by every condition that says the same, and its own
//! transition time (docs/design/05-metrics.md §5.5).
//!
//! A fleet's objects repeat a few hundred combinations of type, status,
//! reason and message across hundreds of thousands of conditions, and
//! differ only in when each turned. Three interned strings and a status
//! per condition cost 40 bytes; one shared pointer and the time cost 16.

use std::collections::HashSet;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;
use std::sync::{Arc, LazyLock};

use parking_lot::Mutex;
use serde::ser::SerializeStruct;
use serde::{Serialize, Serializer};

use super::hop::ConditionStatus;
use super::stamp::Stamp;
use super::text::{Text, sweep_due};

/// What a condition says, apart from when.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ConditionSays {
    pub kind: Text,
    pub status: ConditionStatus,
    pub reason: Text,
    pub message: Text,
}

/// One condition of an object. Reads as its [`ConditionSays`] (`c.kind`,
/// `c.reason`, ...) through `Deref`.
#[derive(Clone, PartialEq)]
pub struct Condition {
    says: Arc<ConditionSays>,
    pub last_transition: Option<Stamp>,
}

impl Condition {
    /// The kind a finalizer holding a deleting object is kept as: one
    /// condition per finalizer, status True, its name the reason, dated by
    /// the deletionTimestamp (docs/design/15-operations.md §15.3). Kept among the
    /// conditions rather than in a field of its own: a field would cost
    /// every view of a fleet its size, for the few objects being deleted.
    pub const FINALIZER: &'static str = "Finalizer";

    pub fn new(
        kind: impl Into<Text>,
        status: ConditionStatus,
        reason: impl Into<Text>,
        message: impl Into<Text>,
        last_transition: Option<Stamp>,
    ) -> Condition {
        let says = ConditionSays {
            kind: kind.into(),
            status,
            reason: reason.into(),
            message: message.into(),
        };
        Condition {
            says: shared(says),
            last_transition,
        }
    }

    /// What the condition's status means for its object (docs/design/12-interfaces.md
    /// §12.5): for most types `True` is good; for the negative ones
    /// (`Degraded` and its kin) `False` is. `Unknown` says nothing.
    pub fn meaning(&self) -> Meaning {
        let negative = NEGATIVE_CONDITIONS.contains(&self.kind.as_str());
        match (self.status, negative) {
            (ConditionStatus::Unknown, _) => Meaning::Unknown,
            (ConditionStatus::True, false) | (ConditionStatus::False, true) => Meaning::Good,
            _ => Meaning::Bad,
        }
    }

    pub fn is_finalizer(&self) -> bool {
        self.kind == Self::FINALIZER
    }

    /// Feed everything the condition says, and when, to `h` (a view's
    /// fingerprint). Destructured, so a new field cannot be forgotten.
    pub fn hash_into(&self, h: &mut impl Hasher) {
        let Condition {
            says,
            last_transition,
        } = self;
        let ConditionSays {
            kind,
            status,
            reason,
            message,
        } = &**says;
        (kind, status, reason, message, last_transition).hash(h);
    }
}

impl Deref for Condition {
    type Target = ConditionSays;
    fn deref(&self) -> &ConditionSays {
        &self.says
    }
}

impl fmt::Debug for Condition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Condition")
            .field("kind", &self.kind)
            .field("status", &self.status)
            .field("reason", &self.reason)
            .field("message", &self.message)
            .field("last_transition", &self.last_transition)
            .finish()
    }
}

/// As the JSON API has always shown it: `type`, `status`, `reason`,
/// `message`, `last_transition`.
/// Condition types whose `True` is the bad state.
pub const NEGATIVE_CONDITIONS: &[&str] =
    &["Degraded", "ManifestWorkDegraded", "HostedClusterDegraded"];

/// What a condition's status means for its object, whatever its polarity.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Meaning {
    Good,
    Bad,
    Unknown,
}

impl Serialize for Condition {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut out = serializer.serialize_struct("Condition", 6)?;
        out.serialize_field("type", &self.kind)?;
        out.serialize_field("status", &self.status)?;
        out.serialize_field("meaning", &self.meaning())?;
        out.serialize_field("reason", &self.reason)?;
        out.serialize_field("message", &self.message)?;
        out.serialize_field("last_transition", &self.last_transition)?;
        out.end()
    }
}

struct Interner {
    said: HashSet<Arc<ConditionSays>>,
    /// Entries after the last sweep.
    after_sweep: usize,
}

static INTERNER: LazyLock<Mutex<Interner>> = LazyLock::new(|| {
    Mutex::new(Interner {
        said: HashSet::new(),
        after_sweep: 0,
    })
});

/// The shared copy of `says`, made on first use; swept as [`Text`]'s
/// interner is, so free text cannot make it grow without bound.
fn shared(says: ConditionSays) -> Arc<ConditionSays> {
    let mut interner = INTERNER.lock();
    if let Some(shared) = interner.said.get(&says) {
        return shared.clone();
    }
    if sweep_due(interner.said.len(), interner.after_sweep) {
        interner.said.retain(|s| Arc::strong_count(s) > 1);
        interner.after_sweep = interner.said.len();
    }
    let shared = Arc::new(says);
    interner.said.insert(shared.clone());
    shared
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_condition_is_a_pointer_and_a_time() {
        assert_eq!(std::mem::size_of::<Condition>(), 16);
    }

    #[test]
    fn conditions_that_say_the_same_share_one_copy_whatever_their_time() {
        let at = Stamp::new(jiff::Timestamp::from_second(1_800_000_000).unwrap_or_default());
        let a = Condition::new("Ready", ConditionStatus::True, "AsExpected", "", Some(at));
        let b = Condition::new("Ready", ConditionStatus::True, "AsExpected", "", None);
        assert!(Arc::ptr_eq(&a.says, &b.says));
        assert_ne!(a, b, "the time still tells them apart");
        let c = Condition::new("Ready", ConditionStatus::False, "AsExpected", "", None);
        assert!(!Arc::ptr_eq(&a.says, &c.says));
        assert_eq!(c.status, ConditionStatus::False);
    }

    #[test]
    fn it_serialises_as_one_flat_object() {
        let c = Condition::new("Applied", ConditionStatus::True, "Done", "ok", None);
        let json = serde_json::to_value(&c).unwrap_or_default();
        assert_eq!(
            json,
            serde_json::json!({"type": "Applied", "status": "true", "meaning": "good",
                "reason": "Done", "message": "ok", "last_transition": null})
        );
    }

    /// A negative condition (`Degraded`) is good when false: the web UI
    /// colours it by this, not by its status.
    #[test]
    fn its_meaning_follows_its_polarity() {
        let cases = [
            ("Available", ConditionStatus::True, Meaning::Good),
            ("Available", ConditionStatus::False, Meaning::Bad),
            ("Degraded", ConditionStatus::False, Meaning::Good),
            ("Degraded", ConditionStatus::True, Meaning::Bad),
            (
                "HostedClusterDegraded",
                ConditionStatus::False,
                Meaning::Good,
            ),
            ("Degraded", ConditionStatus::Unknown, Meaning::Unknown),
        ];
        for (kind, status, want) in cases {
            let c = Condition::new(kind, status, "", "", None);
            assert_eq!(c.meaning(), want, "{kind}={status:?}");
        }
    }
}
