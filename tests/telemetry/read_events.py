#!/usr/bin/env python3
"""Reads a run's TensorBoard event files with the tensorboard package and prints what TensorBoard sees as JSON:
{"files": [names], "scalars": {tag: [[step, value], ...]}, "hparams": {name: value}, "end_status": name,
"outcome": the text of the text plugin's tag "outcome", as its Text tab shows it}.
Usage: read_events.py LOGDIR   (the python3 of scripts/install-python-tools, which has tensorboard 2.21)
"""
import json
import math
import os
import sys

# TensorBoard logs to stdout (its note on purged steps among others): the JSON alone goes there.
result_out, sys.stdout = sys.stdout, sys.stderr

from tensorboard.backend.event_processing import event_accumulator
from tensorboard.plugins.hparams import api_pb2, plugin_data_pb2
from google.protobuf import json_format

logdir = sys.argv[1]
# Every event kept (no reservoir sampling), orphaned steps purged as TensorBoard does by default.
accumulator = event_accumulator.EventAccumulator(
    logdir, size_guidance={event_accumulator.SCALARS: 0, event_accumulator.TENSORS: 0}, purge_orphaned_data=True)
accumulator.Reload()
tags = accumulator.Tags()

result = {
    "files": sorted(name for name in os.listdir(logdir) if "tfevents" in name),
    "scalars": {},
    "hparams": {},
    "end_status": None,
    "outcome": None,
}
for tag in tags["scalars"]:
    result["scalars"][tag] = [[event.step, None if math.isnan(event.value) else event.value]
                              for event in accumulator.Scalars(tag)]


def plugin_data(tag):
    metadata = accumulator.SummaryMetadata(tag)
    assert metadata.plugin_data.plugin_name == "hparams", metadata
    return plugin_data_pb2.HParamsPluginData.FromString(metadata.plugin_data.content)


if "_hparams_/session_start_info" in tags["tensors"]:
    start = plugin_data("_hparams_/session_start_info").session_start_info
    result["hparams"] = {name: json_format.MessageToDict(value) for name, value in start.hparams.items()}
if "_hparams_/session_end_info" in tags["tensors"]:
    result["end_status"] = api_pb2.Status.Name(plugin_data("_hparams_/session_end_info").session_end_info.status)
if "outcome" in tags["tensors"]:
    from tensorboard.util import tensor_util
    event = accumulator.Tensors("outcome")[-1]
    assert accumulator.SummaryMetadata("outcome").plugin_data.plugin_name == "text"
    result["outcome"] = tensor_util.make_ndarray(event.tensor_proto).item().decode()
result_out.write(json.dumps(result) + "\n")
