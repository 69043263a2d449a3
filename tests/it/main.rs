//! Every integration test of hcp-flow in one crate: one build, one link, one
//! harness (`common`). A module per area; `cargo test --test it <module>`
//! runs one area (docs/development.md).

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

mod common;

mod acm_federation;
mod alert_fidelity;
mod alert_fidelity_self_managed;
mod alerting_bundle;
mod alertmanager_channels;
mod bench_smoke;
mod chart_render;
mod config_cli;
mod config_docs;
mod config_load;
mod dashboards_data;
mod day2_vs_world;
mod deletion_standin;
mod demo_split;
mod design_rules;
mod diagnose_demo;
mod diagnose_watch;
mod e2e_prometheus;
mod exporter_vs_world;
mod hostile_input;
mod kube_config;
mod kube_liveness;
mod kube_mapping;
mod kube_rbac;
mod kube_sim_protocol;
mod kube_spans;
mod kube_watch;
mod layering;
mod maestro_connect;
mod maestro_stream;
mod maestro_upstream_shape;
mod metrics_exposition;
mod multi_object_hops;
mod node_pools_service;
mod node_pools_standin;
mod one_reading_per_kind;
mod process_lifecycle;
mod readyz;
mod restart_state;
mod shards;
mod sim_day2;
mod sim_faults;
mod sim_http;
mod sim_node_pools;
mod sim_node_pools_faults;
mod sim_truth;
mod sources_parse;
mod sources_pollers;
mod sources_truth;
mod split_alerts;
mod supervision;
mod topologies;
mod trace_links_standin;
mod traces_demo;
mod traces_otlp;
mod traces_telemetry;
mod upgrades_standin;
mod warm_restart;
mod web_ui;
mod world_kube;
mod world_manual_clock;
mod world_self_managed;
