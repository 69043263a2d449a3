//! A simulated Kubernetes API server (list/watch) for the management-side hops.
