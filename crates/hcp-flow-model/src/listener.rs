//! The hook through which other parts hear the model's events. It sits
//! beside [`Event`] so that a listener (the trace exporter) depends on the
//! model only, not on the store that calls it.

use super::fleet::{Event, Fleet};

/// Hears every model event with read access to the fleet (spans are built
/// from the timeline). Called under the store lock: do no I/O, queue instead.
pub trait EventListener: Send + Sync + 'static {
    fn on_events(&self, events: &[Event], fleet: &Fleet);
}
