//! How the model's vocabularies appear as label values. Here rather than in
//! the model so the model stays free of the metrics library; the orphan rule
//! allows it because the types are this crate's.

use prometheus_client::encoding::{EncodeLabelValue, LabelValueEncoder};

use crate::model::{ConditionStatus, Hop, OperationKind, Outcome, Phase, SloOutcome, Via};

/// Label values are the snake_case names (the derive would use variant names).
macro_rules! label_value_by_as_str {
    ($($t:ty),*) => {$(
        impl EncodeLabelValue for $t {
            fn encode(&self, encoder: &mut LabelValueEncoder<'_>) -> Result<(), std::fmt::Error> {
                std::fmt::Write::write_str(encoder, self.as_str())
            }
        }
    )*};
}
label_value_by_as_str!(
    Hop,
    Phase,
    Via,
    ConditionStatus,
    Outcome,
    SloOutcome,
    OperationKind
);
