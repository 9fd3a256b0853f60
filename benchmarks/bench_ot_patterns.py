"""Length of Layerdeck's -ot value for a set of layers vs one pattern per layer.

The per-layer column is what writing ``--n-cpu-moe``'s own patterns out as
``-ot`` would cost: ``blk\\.<i>\\.ffn_(up|down|gate|gate_up)_(ch|)exps=CPU``
for each layer, comma-joined. Ours is one anchored pattern
``^blk\\.(<set>)\\.ffn_(up|down|gate|gate_up)_(ch|)exps=CPU``. (cmd.exe lines
are limited to 8,191 characters, Windows command lines to 32,767.)

    python benchmarks/bench_ot_patterns.py
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.command.ot_patterns import FFN_EXPS_SUFFIX, int_set_regex, layer_pattern, override_value  # noqa: E402


def per_layer(layers: set[int]) -> str:
    return override_value([(rf"blk\.{i}\.{FFN_EXPS_SUFFIX}", "CPU") for i in sorted(layers)])


def ours(layers: set[int]) -> str:
    return override_value([(layer_pattern(layers, FFN_EXPS_SUFFIX), "CPU")])


def main() -> None:
    rng = random.Random(94)
    cases = [
        ("layers 0-47", set(range(48))),
        ("every other layer of 48", set(range(0, 48, 2))),
        ("every other layer of 94", set(range(0, 94, 2))),
        ("last 20 of 94 (74-93)", set(range(74, 94))),
        ("first 10 (0-9)", set(range(10))),
        ("30 random of 94", set(rng.sample(range(94), 30))),
        ("layers 0-127", set(range(128))),
    ]
    head = f"{'case':<26} {'n':>3}  {'per-layer':>9}  {'ours':>5}  {'ratio':>6}  layer regex"
    print(head)
    print("-" * len(head))
    for name, layers in cases:
        a, b = len(per_layer(layers)), len(ours(layers))
        print(f"{name:<26} {len(layers):>3}  {a:>9}  {b:>5}  {a / b:>5.1f}x  {int_set_regex(layers)}")
    print()
    print("example value:", ours(set(range(74, 94))))


if __name__ == "__main__":
    main()
