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
    "trainpoint": "tp-bench-data --shards: whole shards streamed ahead into the shard cache under the node's workdir, blocks of the shuffle buffer shuffled",
    "litdata": "`StreamingDataset` + `StreamingDataLoader`: chunks into the node's cache",
    "mosaic": "`StreamingDataset` (py1e shuffle): shards into the node's cache (gloo group; the node's ranks share memory)",
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

    # Loading: per round, all the ranks together (nodes x ranks per node), the caches per node.
    traffic = {(r["tool"], r["round"]): r["s3_sent_bytes"] for r in records if r.get("phase") == "traffic"}
    pack_bytes = {(r["tool"], r["round"]): r.get("s3_bytes") for r in records if r.get("phase") == "packed"}
    rounds = {}
    failures = {}
    for r in records:
        if r.get("phase") != "load":
            continue
        rounds.setdefault((r["tool"], r["round"]), []).append(r)
    per_tool = {}
    layout = None
    for (t, n), ranks in sorted(rounds.items()):
        world = ranks[0].get("nodes", 1) * ranks[0].get("ranks_per_node", 2)
        layout = (ranks[0].get("nodes", 1), ranks[0].get("ranks_per_node", 2))
        if len(ranks) != world or any(r["status"] != 0 or "images" not in r for r in ranks):
            failures[t] = failures.get(t, 0) + 1
            continue
        slower = max(r["seconds"] for r in ranks)
        images = sum(r["images"] for r in ranks)
        cpu = sum(r["cpu_seconds"] for r in ranks)
        # Every rank of a node watched the node's whole cache directory: the node's figure is the largest of theirs.
        node_disk, node_peak = {}, {}
        for r in ranks:
            node = r.get("node", 0)
            node_disk[node] = max(node_disk.get(node, 0), r["disk_mb"])
            node_peak[node] = max(node_peak.get(node, 0), r["peak_disk_mb"])
        sent = traffic.get((t, n))
        packed_bytes = pack_bytes.get((t, n))
        by_rank = sorted(ranks, key=lambda r: r["rank"])
        counts = [r["images"] for r in by_rank]
        per_tool.setdefault(t, []).append({
            "round": n, "first": max(r["first_batch_s"] for r in ranks),
            "imports": max(r.get("import_s", 0) for r in ranks),
            "images": images, "ips": images / slower,
            "seconds": slower, "cpu": cpu, "ipc": images / cpu if cpu else None,
            "rss": max(r["peak_rss_mb"] for r in ranks), "pss": max(r["peak_pss_mb"] for r in ranks),
            "disk": sum(node_disk.values()), "peak_disk": sum(node_peak.values()),
            "node_peak": max(node_peak.values()),
            "s3_mb": sent / 2**20 if sent is not None else None,
            "s3_ratio": sent / packed_bytes if sent is not None and packed_bytes else None,
            "node_order": by_rank[0].get("node_order"),
            "per_rank": "/".join(map(str, counts)) if len(counts) <= 4 else f"{min(counts)}-{max(counts)} per rank"})
    load_tools = [t for t in tools if t in per_tool or t in failures]
    if not load_tools:
        return
    keys = ("first", "imports", "images", "ips", "seconds", "cpu", "ipc", "rss", "pss", "disk", "peak_disk",
            "node_peak", "s3_mb", "s3_ratio")
    med = {t: {k: median([run[k] for run in per_tool.get(t, []) if run[k] is not None]) for k in keys}
           for t in load_tools}
    base = med.get("trainpoint", {})
    nodes, ranks_per_node = layout
    world = nodes * ranks_per_node
    print(f"One epoch, {nodes} node(s) x {ranks_per_node} ranks at once ({world} processes on this machine; medians "
          "over the rounds; the ranks start their clocks together after their start-up; first batch: the slowest "
          "rank's; images/s: all the ranks' images / the slowest rank's seconds, both timed from before the dataset "
          "is made (Python's imports not included: they are their own column); CPU s: all the ranks, workers "
          "included; RSS and PSS: the largest rank's process tree; S3: the bytes MinIO sent during the epoch, and "
          "as a multiple of the tool's pack on S3; cache disk: each node's cache directory at its largest (the "
          "largest node), and all the nodes' at the end of the epoch):")
    print()
    print("| tool | how | first batch s | Python imports s | images (per rank) | images/s | CPU s | images per CPU-s | "
          "peak RSS MB per rank | peak PSS MB per rank | MB read from S3 | ÷ its pack on S3 | peak cache MB per node | "
          "cache MB at the end, all nodes | trainpoint's images/s ÷ tool's | first batch ÷ trainpoint's |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for t in load_tools:
        m = med[t]
        runs = per_tool.get(t, [])
        failed = f" ({failures[t]} of {failures[t] + len(runs)} failed)" if failures.get(t) else ""
        split = runs[0]["per_rank"] if runs else "—"
        how = LOAD_HOW[t]
        if t == "trainpoint" and runs and nodes > 1:
            how += ("; epoch order dealt by node (ranks_per_node)" if runs[0]["node_order"] in (True, "true")
                    else "; the sampler has no ranks_per_node: every rank's samples from every shard")
        print(f"| {t}{failed} | {how} | {fmt(m['first'], 2)} | {'' if t == 'trainpoint' else fmt(m['imports'], 2)} | "
              f"{fmt(m['images'], 0)} ({split}) | {fmt(m['ips'], 0)} | {fmt(m['cpu'])} | {fmt(m['ipc'], 0)} | "
              f"{fmt(m['rss'], 0)} | {fmt(m['pss'], 0)} | {fmt(m['s3_mb'], 0)} | "
              f"{'—' if m['s3_ratio'] is None else fmt(m['s3_ratio'], 2) + 'x'} | {fmt(m['node_peak'], 0)} | "
              f"{fmt(m['disk'], 0)} | {'' if t == 'trainpoint' else ratio(m['ips'], base.get('ips'))} | "
              f"{'' if t == 'trainpoint' else ratio(base.get('first'), m['first'])} |")
    print()
    print("Per round (round: images/s, first batch s, S3 read ÷ pack, peak cache MB per node):")
    print()
    for t in load_tools:
        cells = [f"{run['round']}: {run['ips']:.0f}, {run['first']:.2f} s, "
                 f"{'—' if run['s3_ratio'] is None else format(run['s3_ratio'], '.2f') + 'x'}, {run['node_peak']:.0f} MB"
                 for run in per_tool.get(t, [])]
        print(f"- {t}: " + "; ".join(cells))

if __name__ == "__main__":
    main()
