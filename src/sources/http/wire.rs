//! The upstreams' JSON as the pollers read it: nulls, times and conditions
//! (the views' own, re-exported), and the quoting of search expressions.

// One reading of conditions, times and nulls for every source: the views'.
pub use crate::views::conditions::{read as conditions, transition_of};
pub use crate::views::{WireCondition, null_default, parse_time};

/// Quote a value for an OCM/Maestro `search` expression.
pub fn sql_quote(value: &str) -> String {
    format!("'{}'", value.replace('\'', "''"))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn quoting_doubles_single_quotes() {
        assert_eq!(sql_quote("a'b"), "'a''b'");
    }
}
