#!/usr/bin/env python3
"""Two loaders in one process (a train loader and a small eval loader, say):
does the smaller one slow the larger one down?

    PYTHONPATH=build/python /usr/bin/python3 bench/python/two_loaders.py \
        PLAN --var DATA=DIR [--threads 2] [--batches 8] [--rounds 5]

Each round times --batches batches of loader A (--threads threads, prefetch
1) twice, in alternating order: alone, and with an idle loader B of one
thread alive beside it (B fills its buffers first, then waits). oneTBB
applies the smallest max_allowed_parallelism of the live global_control
objects, so a loader that kept its own control let B's limit (2 threads)
cap A. Prints the median images/s of A in both cases and their ratio
(target: 1.0, within noise).
"""

import argparse
import statistics
import time

import sluice


def images_per_second(loader, batches, batch_size):
    loader.next()  # warm-up: the pipeline is full from here on
    start = time.perf_counter()
    got = 0
    while got < batches:
        if loader.next() is not None:
            got += 1
    return batches * batch_size / (time.perf_counter() - start)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("plan")
    parser.add_argument("--var", action="append", default=[], help="NAME=VALUE")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batches", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    plan = sluice.load(args.plan, vars=dict(v.split("=", 1) for v in args.var))
    results = {"alone": [], "beside B": []}
    for round_index in range(args.rounds):
        order = ["alone", "beside B"] if round_index % 2 == 0 else ["beside B", "alone"]
        for case in order:
            other = None
            if case == "beside B":
                other = plan.loader(threads=1, prefetch=1)
                time.sleep(2)  # B fills its buffers, then idles
            loader = plan.loader(threads=args.threads, prefetch=1)
            rate = images_per_second(loader, args.batches, loader.batch_size)
            results[case].append(rate)
            print("round %d %-8s %.1f images/s" % (round_index + 1, case, rate), flush=True)
            del loader, other
    alone = statistics.median(results["alone"])
    beside = statistics.median(results["beside B"])
    print("RESULT two_loaders threads=%d alone=%.1f beside_b=%.1f ratio=%.2f"
          % (args.threads, alone, beside, beside / alone))


if __name__ == "__main__":
    main()
