#!/usr/bin/env python3
"""Reads the runs of an MLflow experiment through MLflow's Python client and prints them as JSON:
[{"run_id", "experiment_id", "name", "status", "params": {}, "tags": {}, "metrics": {key: [[step, value], ...]},
  "artifacts": [paths]}], oldest first.
Usage: read_mlflow.py TRACKING_URI EXPERIMENT_NAME   (the python3 of scripts/install-python-tools)
"""
import json
import sys

result_out, sys.stdout = sys.stdout, sys.stderr  # the JSON alone on stdout

from mlflow.tracking import MlflowClient

uri, experiment_name = sys.argv[1], sys.argv[2]
client = MlflowClient(tracking_uri=uri)
experiment = client.get_experiment_by_name(experiment_name)
runs = []
if experiment is not None:
    for run in reversed(client.search_runs([experiment.experiment_id], order_by=["attributes.start_time DESC"])):
        metrics = {}
        for key in run.data.metrics:
            history = sorted(client.get_metric_history(run.info.run_id, key), key=lambda m: (m.step, m.timestamp))
            metrics[key] = [[m.step, m.value] for m in history]
        runs.append({
            "run_id": run.info.run_id,
            "experiment_id": run.info.experiment_id,
            "name": run.info.run_name,
            "status": run.info.status,
            "params": run.data.params,
            "tags": run.data.tags,
            "metrics": metrics,
            "artifacts": sorted(a.path for a in client.list_artifacts(run.info.run_id)),
        })
result_out.write(json.dumps(runs) + "\n")
