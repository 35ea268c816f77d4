"""bench/shards/run.sh's summary: Markdown tables of the medians over the rounds of results.jsonl.

usage: summary.py RESULTS.jsonl
"""
import json
import statistics
import sys

PACK_HOW = {
    "trainpoint": "`trainpoint pack --workers W`: shards written at once, each verified, then uploaded",
    "litdata": "`litdata.optimize(num_workers=W)` to `s3://`: each worker writes and uploads its chunks",
    "mosaic": "`MDSWriter(out=\"s3://\", max_workers=W)`: one writer, shards uploaded by W threads",
    "webdataset": "`ShardWriter(\"pipe:s5cmd pipe s3://...\")`: one writer, each tar streamed to S3 (no local file)",
}
LOAD_HOW = {
    "trainpoint": "tp-bench-data --shards: whole shards streamed 4 ahead into each rank's cache, blocks of the shuffle buffer shuffled",
    "litdata": "`StreamingDataset` + `StreamingDataLoader`: chunks into the node's cache",
    "mosaic": "`StreamingDataset` (py1e shuffle): shards into the node's cache (gloo group)",
    "webdataset": "`WebDataset` over `pipe:s5cmd cat`, shard shuffle + the shuffle buffer: no cache",
    "s3torch": "`S3MapDataset` over the unpacked images: a GET per image, `DistributedSampler`",
}
ORDER = ["trainpoint", "litdata", "mosaic", "webdataset", "s3torch"]


def median(values):
    return statistics.median(values) if values else None


def fmt(value, digits=1):
    return "—" if value is None else f"{value:.{digits}f}"


def ratio(mine, theirs):
    return "—" if not mine or not theirs else f"{theirs / mine:.2f}x"


def main():
    records = [json.loads(line) for line in open(sys.argv[1]) if line.startswith("{")]
    tools = [t for t in ORDER if any(r.get("tool") == t for r in records)]

    # Packing.
    packs = {t: [r for r in records if r.get("phase") == "pack" and r["tool"] == t] for t in tools}
    packed = {t: [r for r in records if r.get("phase") == "packed" and r["tool"] == t] for t in tools}
    pack_tools = [t for t in tools if packs[t]]
    if pack_tools:
        med = {}
        for t in pack_tools:
            ok = [r for r in packs[t] if r["status"] == 0]
            med[t] = {"s": median([r["wall_s"] for r in ok]), "cpu": median([r["tree_cpu_s"] for r in ok]),
                      "rss": median([r["peak_rss_mb"] for r in ok]), "disk": median([r["peak_disk_mb"] for r in ok]),
                      "shards": median([r["shards"] for r in packed[t]]),
                      "mb": median([r["s3_mb"] for r in packed[t]]), "failed": len(packs[t]) - len(ok),
                      "runs": len(packs[t])}
        base = med.get("trainpoint", {}).get("s")
        print(f"Packing the folder to S3 (medians of {max(m['runs'] for m in med.values())} round(s); the whole "
              "command, Python's imports included):")
        print()
        print("| tool | how | seconds | CPU s | peak RSS MB | local disk MB (peak) | shards | MB on S3 | "
              "seconds / trainpoint's |")
        print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
        for t in pack_tools:
            m = med[t]
            failed = f" ({m['failed']} of {m['runs']} failed)" if m["failed"] else ""
            print(f"| {t}{failed} | {PACK_HOW[t]} | {fmt(m['s'], 2)} | {fmt(m['cpu'])} | {fmt(m['rss'], 0)} | "
                  f"{fmt(m['disk'], 0)} | {fmt(m['shards'], 0)} | {fmt(m['mb'], 0)} | {'' if t == 'trainpoint' else ratio(base, m['s'])} |")
        print()

    # Loading: per round, the two ranks together.
    rounds = {}
    failures = {}
    for r in records:
        if r.get("phase") != "load":
            continue
        rounds.setdefault((r["tool"], r["round"]), []).append(r)
    per_tool = {}
    for (t, n), ranks in sorted(rounds.items()):
        if len(ranks) != 2 or any(r["status"] != 0 or "images" not in r for r in ranks):
            failures[t] = failures.get(t, 0) + 1
            continue
        slower = max(r["seconds"] for r in ranks)
        images = sum(r["images"] for r in ranks)
        cpu = sum(r["cpu_seconds"] for r in ranks)
        shared = ranks[0].get("shared_cache") in (True, "true")
        disk = max(r["disk_mb"] for r in ranks) if shared else sum(r["disk_mb"] for r in ranks)
        peak_disk = max(r["peak_disk_mb"] for r in ranks) if shared else sum(r["peak_disk_mb"] for r in ranks)
        per_tool.setdefault(t, []).append({
            "first": max(r["first_batch_s"] for r in ranks), "imports": max(r.get("import_s", 0) for r in ranks),
            "images": images, "ips": images / slower,
            "seconds": slower, "cpu": cpu, "ipc": images / cpu if cpu else None,
            "rss": max(r["peak_rss_mb"] for r in ranks), "pss": max(r["peak_pss_mb"] for r in ranks),
            "disk": disk, "peak_disk": peak_disk,
            "per_rank": "/".join(str(r["images"]) for r in sorted(ranks, key=lambda r: r["rank"]))})
    load_tools = [t for t in tools if t in per_tool or t in failures]
    if load_tools:
        med = {t: {k: median([run[k] for run in per_tool.get(t, []) if run[k] is not None])
                   for k in ("first", "imports", "images", "ips", "seconds", "cpu", "ipc", "rss", "pss", "disk", "peak_disk")}
               for t in load_tools}
        base = med.get("trainpoint", {})
        print("One epoch, 2 ranks at once (medians over the rounds; first batch: the slower rank's; images/s: both "
              "ranks' images / the slower rank's seconds, both timed from before the dataset is made (Python's imports "
              "not included: they are their own column); CPU s: both ranks, workers included; RSS and PSS: the "
              "larger rank's process tree; disk: the ranks' caches together at the end of the epoch, and at their "
              "largest):")
        print()
        print("| tool | how | first batch s | Python imports s | images (rank 0/1) | images/s | CPU s | images per CPU-s | peak RSS MB "
              "per rank | peak PSS MB per rank | cache disk MB, end / peak | trainpoint's images/s ÷ tool's | "
              "first batch ÷ trainpoint's |")
        print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for t in load_tools:
            m = med[t]
            runs = per_tool.get(t, [])
            failed = f" ({failures[t]} of {failures[t] + len(runs)} failed)" if failures.get(t) else ""
            split = runs[0]["per_rank"] if runs else "—"
            print(f"| {t}{failed} | {LOAD_HOW[t]} | {fmt(m['first'], 2)} | {'' if t == 'trainpoint' else fmt(m['imports'], 2)} | {fmt(m['images'], 0)} ({split}) | "
                  f"{fmt(m['ips'], 0)} | {fmt(m['cpu'])} | {fmt(m['ipc'], 0)} | {fmt(m['rss'], 0)} | "
                  f"{fmt(m['pss'], 0)} | {fmt(m['disk'], 0)} / {fmt(m['peak_disk'], 0)} | "
                  f"{'' if t == 'trainpoint' else ratio(m['ips'], base.get('ips'))} | "
                  f"{'' if t == 'trainpoint' else ratio(base.get('first'), m['first'])} |")


if __name__ == "__main__":
    main()
