"""Reads the shards `trainpoint pack` wrote in DEST with WebDataset's own pipeline, as users' Python code would,
and prints what it found as JSON: for the training and the validation set, each sample's key, its image's
SHA-256 and width as PIL decodes it, and its class. For tests/storage's pack_test.

usage: read_with_webdataset.py DEST
"""
import hashlib
import io
import json
import sys

import webdataset as wds
from PIL import Image

destination = sys.argv[1]
with open(f"{destination}/index.json") as file:
    index = json.load(file)
found = {}
for set_name in ("train", "valid"):
    urls = [f"{destination}/{shard['name']}" for shard in index.get(set_name, {}).get("shards", [])]
    samples = []
    if urls:
        for key, image, cls in wds.WebDataset(urls, shardshuffle=False).to_tuple("__key__", "jpg", "cls"):
            samples.append({"key": key, "sha256": hashlib.sha256(image).hexdigest(),
                            "width": Image.open(io.BytesIO(image)).width, "cls": int(cls)})
    found[set_name] = samples
print(json.dumps(found))
