//! How the model's vocabularies appear as label values. Here rather than in
//! the model so the model stays free of the metrics library.

use prometheus_client::encoding::{EncodeLabelValue, LabelValueEncoder};

use crate::model::{ConditionStatus, Hop, OperationKind, Outcome, Phase, SloOutcome, Via};

/// A model value as a label value: its snake_case name. The model is a
/// crate of its own that knows no metrics library, so its types are wrapped
/// here (the orphan rule allows implementing the library's trait for this
/// crate's wrapper only).
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, PartialOrd, Ord)]
pub struct Label<T>(pub T);

/// What a label value reads as.
pub trait AsLabel {
    fn as_label(&self) -> &'static str;
}

impl<T: AsLabel> EncodeLabelValue for Label<T> {
    fn encode(&self, encoder: &mut LabelValueEncoder<'_>) -> Result<(), std::fmt::Error> {
        std::fmt::Write::write_str(encoder, self.0.as_label())
    }
}

impl<T> From<T> for Label<T> {
    fn from(value: T) -> Self {
        Label(value)
    }
}

macro_rules! label_by_as_str {
    ($($t:ty),*) => {$(
        impl AsLabel for $t {
            fn as_label(&self) -> &'static str {
                self.as_str()
            }
        }
    )*};
}
label_by_as_str!(
    Hop,
    Phase,
    Via,
    ConditionStatus,
    Outcome,
    SloOutcome,
    OperationKind
);
