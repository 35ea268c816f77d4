#!/usr/bin/env python3
"""Creates a run in an MLflow experiment (created when missing) through MLflow's Python client, as a user's
own code would before handing its id to trainpoint as MLFLOW_RUN_ID; prints the run's id.
Usage: create_mlflow_run.py TRACKING_URI EXPERIMENT_NAME RUN_NAME   (the python3 of scripts/install-python-tools)
"""
import sys

result_out, sys.stdout = sys.stdout, sys.stderr  # the id alone on stdout

from mlflow.tracking import MlflowClient

uri, experiment_name, run_name = sys.argv[1:4]
client = MlflowClient(tracking_uri=uri)
experiment = client.get_experiment_by_name(experiment_name)
experiment_id = experiment.experiment_id if experiment else client.create_experiment(experiment_name)
run = client.create_run(experiment_id, run_name=run_name, tags={"made.by": "create_mlflow_run.py"})
result_out.write(run.info.run_id + "\n")
