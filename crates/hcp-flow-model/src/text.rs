//! Interned condition text (docs/performance.md): a fleet's conditions
//! repeat a few hundred kinds, reasons and messages across hundreds of
//! thousands of objects, each held by a source's facts and by the model.
//! One shared copy of each string instead of one per condition.

use std::borrow::Borrow;
use std::collections::HashSet;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;
use std::sync::{Arc, LazyLock};

use parking_lot::Mutex;
use serde::{Serialize, Serializer};

/// An immutable string shared by everything that holds the same text. One
/// pointer wide (the length lives with the text): a condition holds three,
/// and a fleet holds hundreds of thousands of conditions.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Text(Arc<Box<str>>);

/// The interner's entry, found by the text it holds.
#[derive(PartialEq, Eq, Hash)]
struct Entry(Arc<Box<str>>);

impl Borrow<str> for Entry {
    fn borrow(&self) -> &str {
        &self.0
    }
}

/// Below this many entries the interner never sweeps.
const SWEEP_FLOOR: usize = 4096;

struct Interner {
    strings: HashSet<Entry>,
    /// Entries after the last sweep; the next runs at twice as many.
    after_sweep: usize,
}

static INTERNER: LazyLock<Mutex<Interner>> = LazyLock::new(|| {
    Mutex::new(Interner {
        strings: HashSet::new(),
        after_sweep: 0,
    })
});

impl Text {
    /// The shared copy of `s`, made on first use. Text nothing else holds
    /// any more is dropped from the interner when it has doubled since the
    /// last sweep, so free text (a message naming its cluster) cannot make
    /// it grow without bound: it holds at most twice what is live.
    pub fn intern(s: &str) -> Text {
        let mut interner = INTERNER.lock();
        if let Some(shared) = interner.strings.get(s) {
            return Text(shared.0.clone());
        }
        if sweep_due(interner.strings.len(), interner.after_sweep) {
            interner
                .strings
                .retain(|shared| Arc::strong_count(&shared.0) > 1);
            interner.after_sweep = interner.strings.len();
        }
        let shared: Arc<Box<str>> = Arc::new(Box::from(s));
        interner.strings.insert(Entry(shared.clone()));
        Text(shared)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Whether an interner of `len` entries, `after_sweep` after its last
/// sweep, drops what nothing else holds before it grows: when it has
/// doubled, so it holds at most twice what is live.
pub(super) fn sweep_due(len: usize, after_sweep: usize) -> bool {
    len >= SWEEP_FLOOR.max(after_sweep * 2)
}

/// The empty text, interned once: every new hop starts with it, and a
/// clone needs no lock.
static EMPTY: LazyLock<Text> = LazyLock::new(|| Text::intern(""));

impl Default for Text {
    fn default() -> Text {
        EMPTY.clone()
    }
}

impl Deref for Text {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for Text {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for Text {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl Hash for Text {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl fmt::Debug for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self.as_str(), f)
    }
}

impl Serialize for Text {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl From<&str> for Text {
    fn from(s: &str) -> Text {
        Text::intern(s)
    }
}

impl From<String> for Text {
    fn from(s: String) -> Text {
        Text::intern(&s)
    }
}

impl From<&String> for Text {
    fn from(s: &String) -> Text {
        Text::intern(s)
    }
}

impl From<Text> for String {
    fn from(t: Text) -> String {
        t.as_str().to_string()
    }
}

impl PartialEq<str> for Text {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Text {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<String> for Text {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other.as_str()
    }
}

impl PartialEq<Text> for String {
    fn eq(&self, other: &Text) -> bool {
        *self == other.as_str()
    }
}

impl PartialEq<Text> for &str {
    fn eq(&self, other: &Text) -> bool {
        *self == other.as_str()
    }
}

impl PartialEq<Text> for str {
    fn eq(&self, other: &Text) -> bool {
        self == other.as_str()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_is_one_pointer_wide() {
        assert_eq!(std::mem::size_of::<Text>(), std::mem::size_of::<usize>());
    }

    #[test]
    fn the_same_text_is_one_allocation() {
        let a = Text::intern("All is well");
        let b = Text::from("All is well".to_string());
        assert!(Arc::ptr_eq(&a.0, &b.0));
        assert_eq!(a, "All is well");
        assert_eq!(Text::default(), "");
    }

    #[test]
    fn text_nothing_holds_is_swept_so_the_interner_stays_bounded() {
        // Free text, each string used once and dropped: without the sweep
        // the interner would hold all of them.
        for i in 0..SWEEP_FLOOR * 8 {
            drop(Text::intern(&format!(
                "cluster-{i} is not reachable (swept)"
            )));
        }
        let held = INTERNER.lock().strings.len();
        assert!(
            held <= SWEEP_FLOOR * 2 + 64,
            "{held} strings held after the sweeps"
        );
        let kept = Text::intern("kept across sweeps");
        for i in 0..SWEEP_FLOOR * 4 {
            drop(Text::intern(&format!("more free text {i}")));
        }
        assert!(Arc::ptr_eq(&kept.0, &Text::intern("kept across sweeps").0));
    }
}
