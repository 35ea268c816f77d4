"""GPU 0's utilisation while another process trains: NVML's utilisation percent (the share of the last sample
period in which a kernel ran), sampled every 100 ms from start, or from when FILE holds LINES lines with
--after (a trainer's steps.jsonl past its first epoch), until SIGTERM or SIGINT; then one JSON line,
{"gpu_util_percent": mean, "gpu_util_samples": n}, is written to OUTFILE. Without pynvml or a GPU, or stopped
before FILE held LINES lines, it writes {"gpu_util_percent": null, "gpu_util_samples": 0, "why": ...} when
stopped all the same; it exits 0 either way. python_loader.py samples with start_gpu_util_sampling() as well.
usage: python3 gpu_util.py OUTFILE [--after FILE LINES] & ...; kill -TERM $!; wait $!"""
import argparse
import json
import signal
import threading

SAMPLE_INTERVAL_S = 0.1


def start_gpu_util_sampling():
    """Samples GPU 0's utilisation every SAMPLE_INTERVAL_S in a background thread. Returns a function that
    stops the sampling and returns {"gpu_util_percent": mean, "gpu_util_samples": n}. Raises ImportError
    without pynvml, pynvml.NVMLError without a driver or GPU or without the counter."""
    import pynvml
    pynvml.nvmlInit()
    try:  # the first sample here, so that a GPU without the counter (a MIG slice) raises to the caller
        gpu = pynvml.nvmlDeviceGetHandleByIndex(0)
        samples = [pynvml.nvmlDeviceGetUtilizationRates(gpu).gpu]
    except pynvml.NVMLError:
        pynvml.nvmlShutdown()
        raise
    stop = threading.Event()

    def sample():
        while not stop.wait(SAMPLE_INTERVAL_S):
            samples.append(pynvml.nvmlDeviceGetUtilizationRates(gpu).gpu)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()

    def finish():
        stop.set()
        sampler.join()
        pynvml.nvmlShutdown()
        return {"gpu_util_percent": round(sum(samples) / len(samples), 1), "gpu_util_samples": len(samples)}

    return finish


def wait_for_lines(path, lines, stopped):
    """Until the file at path holds that many lines (True) or stopped is set (False)."""
    while not stopped.is_set():
        try:
            with open(path) as text:
                if sum(1 for _ in text) >= lines:
                    return True
        except FileNotFoundError:
            pass
        stopped.wait(SAMPLE_INTERVAL_S)
    return False


def main():
    stopped = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stopped.set())
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("outfile")
    parser.add_argument("--after", nargs=2, metavar=("FILE", "LINES"),
                        help="start sampling when FILE holds LINES lines")
    args = parser.parse_args()
    if args.after and not wait_for_lines(args.after[0], int(args.after[1]), stopped):
        finish_sampling, why = None, f"stopped before {args.after[0]} held {args.after[1]} lines"
    else:
        try:
            finish_sampling, why = start_gpu_util_sampling(), None
        except Exception as error:  # ImportError, or pynvml.NVMLError (only a working import can name it)
            finish_sampling, why = None, f"{type(error).__name__}: {error}"
    while not stopped.wait(1):
        pass
    if finish_sampling:
        result = finish_sampling()
    else:
        result = {"gpu_util_percent": None, "gpu_util_samples": 0, "why": why}
    with open(args.outfile, "w") as out:
        out.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
