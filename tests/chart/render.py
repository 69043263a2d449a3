#!/usr/bin/env python3
"""Lint and render a chart with Helm's own engine, offline, for the chart tests.

Helm runs in-process through helm-python-sdk (`pip install helm-python-sdk`),
which binds Helm v4's Go SDK (libhelm_c) with ctypes: the same template engine,
schema validation and linter as the `helm` binary, without one.

Input (stdin, JSON): {"chart": DIR, "release": NAME, "namespace": NS,
                      "scenarios": [{"name": N, "values_yaml": TEXT}, ...]}
Output (stdout, JSON): {"helm_sdk": VERSION,
                        "scenarios": {N: {"error": null | TEXT,
                                          "lint": {...}, "manifests": {PATH: TEXT}}}}
A scenario whose values fail the schema or whose templates fail to render has
"error" set; the caller decides whether that was expected. Exit status 3 means
the SDK is not installed.
"""

import json
import sys

try:
    import helm_python as helm
except ImportError as exc:  # pragma: no cover - reported to the Rust test
    print(
        f"helm-python-sdk is not importable ({exc}); install it with "
        "`python3 -m pip install helm-python-sdk` (.ci/run does)",
        file=sys.stderr,
    )
    sys.exit(3)


def run_scenario(chart, path, release, namespace, values_yaml):
    out = {"error": None, "lint": None, "manifests": {}}
    try:
        values = helm.values_from_yaml(values_yaml) if values_yaml.strip() else {}
        chart.validate_schema(values)
        out["lint"] = helm.lint(path, values, strict=True, namespace=namespace)
        out["manifests"] = chart.render(
            values, name=release, namespace=namespace, is_install=True
        )
    except helm.HelmError as exc:
        out["error"] = f"{type(exc).__name__}: {exc}"
    return out


def main():
    request = json.load(sys.stdin)
    path = request["chart"]
    result = {"helm_sdk": helm.helm_sdk_version(), "scenarios": {}}
    with helm.Chart.load(path) as chart:
        for scenario in request["scenarios"]:
            result["scenarios"][scenario["name"]] = run_scenario(
                chart,
                path,
                request["release"],
                request["namespace"],
                scenario["values_yaml"],
            )
    json.dump(result, sys.stdout)


if __name__ == "__main__":
    main()
