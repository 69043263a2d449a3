//! The simulated world (sim helper).
