//! The simulated world a test runs against: the demo's world by default, a
//! test's own [`WorldConfig`] where it varies a field
//! (`WorldConfig { churn: false, ..world::demo(60, 23) }`).

use std::net::SocketAddr;
use std::ops::{Deref, DerefMut};

use hcp_flow::demo::{Demo, DemoSettings, start_world};
use hcp_flow::sim::{LatencyModel, SimClock, WorldConfig, WorldKind};

/// The world `hcp-flow demo --clusters N --seed S` runs, at 60× with faults
/// and churn, without upstream latency (tests wait on the world, not on it).
pub fn demo(clusters: usize, seed: u64) -> WorldConfig {
    WorldConfig {
        clusters,
        speed: 60.0,
        seed,
        faults: true,
        churn: true,
        latency: LatencyModel::none(),
        subscriptions: 3,
        not_handed_over: 0.0,
        failure_burst: None,
        kind: WorldKind::Aro,
    }
}

/// What `hcp-flow demo` would be given for `world`: the demo derives the
/// exporter's configuration from it (poll intervals, SLO target and budgets
/// divided by the speed), and listens on a free loopback port.
pub fn settings(world: &WorldConfig) -> DemoSettings {
    DemoSettings {
        clusters: world.clusters,
        speed: world.speed,
        seed: world.seed,
        faults: world.faults,
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        world: world.kind,
        // The harness reads Maestro over REST unless a test asks for the
        // stream (`start_streaming`).
        maestro_stream: false,
    }
}

/// A running world (its upstreams on loopback) and the configuration that
/// reads it, holding a share of the machine (`load`) while it runs.
pub struct TestWorld {
    demo: Demo,
    _load: super::load::Share,
}

impl Deref for TestWorld {
    type Target = Demo;
    fn deref(&self) -> &Demo {
        &self.demo
    }
}

impl DerefMut for TestWorld {
    fn deref_mut(&mut self) -> &mut Demo {
        &mut self.demo
    }
}

impl TestWorld {
    /// The speed the world runs at: what the exporter divides its
    /// histogram bounds by.
    pub fn speed(&self) -> f64 {
        self.demo.world.config().speed
    }
}

/// Starts `world` on the real clock.
pub async fn start(world: WorldConfig) -> TestWorld {
    start_with_clock(world, SimClock::Real).await
}

/// Starts `world` on the real clock, with the exporter's configuration
/// hearing Maestro over its gRPC stream (what `hcp-flow demo` does).
pub async fn start_streaming(world: WorldConfig) -> TestWorld {
    let mut settings = settings(&world);
    settings.maestro_stream = true;
    start_with_settings(settings, world, SimClock::Real).await
}

/// Starts `world` on `clock` (a manual one moves only when the test says).
pub async fn start_with_clock(world: WorldConfig, clock: SimClock) -> TestWorld {
    start_with_settings(settings(&world), world, clock).await
}

async fn start_with_settings(
    settings: DemoSettings,
    world: WorldConfig,
    clock: SimClock,
) -> TestWorld {
    super::init();
    let load = super::load::share();
    let demo = start_world(&settings, world, clock)
        .await
        .expect("the simulated world starts on loopback");
    TestWorld { demo, _load: load }
}
