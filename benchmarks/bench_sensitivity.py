"""The sensitivity card costs about one evaluation per distinct input, not one per variant.

Runs, in one process on the decoded stimuli, one plain ``evaluate`` of the bundled model (its own
protocol) and the full sensitivity card, alternating, and prints the medians and

    card_ratio = card time / one evaluation        (goal: <= distinct inputs + 0.2)
    floor_ratio = card time / sum of one evaluation per distinct input   (1.0 = no overhead)

together with the number of variants and of forwards (distinct inputs) the card ran. The second ratio
matters because a distinct input with a resize costs more than the reference evaluation (the 256
resize of 1280 images runs through PIL, see docs/performance.md).

    python benchmarks/bench_sensitivity.py [--repeats 1] [--batch-size 32] [--threads auto]
"""

from __future__ import annotations

import argparse
import time

from _common import DATA_ROOT, load_average, median, print_table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", default="auto")
    args = parser.parse_args()

    from modelval.api.protocol import sensitivity_card
    from modelval.behaviour.sensitivity import input_key, protocol_variants
    from modelval.datasets.stimulus_set import StimulusSet
    from modelval.evaluation import evaluate
    from modelval.models import load_model
    from modelval.runtime import set_threads

    threads = set_threads(args.threads)
    loaded = load_model("efficientnet_lite0", progress=False)
    source = loaded.config.preprocess
    stimuli = StimulusSet.load(DATA_ROOT, progress=False)
    reference, variants = protocol_variants(source)
    distinct = list(dict.fromkeys(input_key(v.config) for v in (reference, *variants)))
    single, floors, cards, forwards = [], [], [], 0
    for _ in range(args.repeats):
        times = []
        for config in distinct:
            start = time.perf_counter()
            evaluate(loaded.model, config, stimuli, batch_size=args.batch_size, device="cpu", progress=False)
            times.append(time.perf_counter() - start)
        single.append(times[0])
        floors.append(sum(times))
        start = time.perf_counter()
        card = sensitivity_card(loaded.model, source, stimuli, batch_size=args.batch_size, device="cpu", progress=False)
        cards.append(time.perf_counter() - start)
        forwards = card.forwards
    one, floor, whole = median(single), median(floors), median(cards)
    print(f"threads {threads}, batch {args.batch_size}, load {load_average()}, repeats {args.repeats}")
    print_table(
        ["what", "variants", "forwards", "median s"],
        [
            ["one evaluation (reference protocol)", 1, 1, f"{one:.1f}"],
            ["one evaluation per distinct input", len(distinct), len(distinct), f"{floor:.1f}"],
            ["sensitivity card", len(variants), forwards, f"{whole:.1f}"],
        ],
    )
    print(f"card_ratio = {whole / one:.2f} (goal <= {forwards} + 0.2 = {forwards + 0.2:.1f})")
    print(f"floor_ratio = {whole / floor:.2f} (1.0 = the card costs its forwards and nothing more)")


if __name__ == "__main__":
    main()
