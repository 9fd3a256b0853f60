"""Decode speed with speculative decoding by a draft model (``-md`` with ``--spec-type draft-simple``).

One step of llama.cpp's draft-simple loop (``common_speculative_impl_draft_simple``, common/speculative.cpp)
drafts up to ``n`` tokens with the draft model, one at a time, then the target checks them in one batch of
``n + 1``. With each drafted token accepted with probability ``a`` (independently: the usual model of
Leviathan et al. 2023, "Fast Inference from Transformers via Speculative Decoding"), a step yields
``(1 - a**(n+1)) / (1 - a)`` tokens on average. The rate ``a`` depends on the pair of models and on the text;
it is a figure the user sets (llama-server reports the measured one: ``draft acceptance rate`` in its log and
``/slots``). Drafting stops early at low confidence (``--spec-draft-p-min``); a step is taken here as always
drafting ``n``, which bounds its cost from above.
"""

from __future__ import annotations

from dataclasses import dataclass

#: the acceptance rate assumed until the user sets one: a same-family small draft on chat text (Qwen3-0.6B for
#: Qwen3-8B and similar pairs) is commonly reported between 0.6 and 0.8 per token
DEFAULT_ACCEPTANCE = 0.7


@dataclass(frozen=True)
class SpeculativeDecode:
    tokens_per_s: float  # with speculation
    plain_tokens_per_s: float  # the target alone
    tokens_per_step: float  # expected accepted tokens (plus the target's own) per step
    step_seconds: float
    draft_seconds: float  # drafting n tokens
    verify_seconds: float  # the target's batch of n + 1
    n_draft: int
    acceptance: float
    notes: tuple[str, ...] = ()

    @property
    def speedup(self) -> float:
        return self.tokens_per_s / self.plain_tokens_per_s if self.plain_tokens_per_s else 0.0

    def text(self) -> str:
        return (
            f"with the draft: {self.tokens_per_s:.1f} tok/s ({self.speedup:.2f}x the {self.plain_tokens_per_s:.1f} "
            f"of the model alone) at an acceptance rate of {self.acceptance:.0%} for {self.n_draft} drafted tokens "
            f"a step ({self.tokens_per_step:.2f} tokens a step); an upper bound: on a 2-core CPU llama-server "
            "measured 40-52% less (docs/speed-model.md)"
        )


def expected_tokens(acceptance: float, n_draft: int) -> float:
    """Tokens a step yields on average: the accepted prefix of ``n_draft`` drafts plus the target's own."""
    a = min(max(acceptance, 0.0), 1.0)
    if a >= 1.0:
        return float(n_draft + 1)
    return (1.0 - a ** (n_draft + 1)) / (1.0 - a)


#: measured on this project's 2-core machine (benchmarks/bench_speculative.py): the model and the draft both on
#: the CPU, acceptance 1.0, 3 drafted tokens: 5.6 tok/s with llama.cpp's default thread polling, 8.8 with
#: ``--poll 0 --spec-draft-poll 0`` (the model alone: 9.4); each context's thread pool spins while the other runs
POLL_ADVICE = (
    "the model and the draft both run on the CPU: their thread pools poll for work and slow each other down on "
    "a CPU with few cores; try --poll 0 --spec-draft-poll 0 (measured on 2 cores: 5.6 tok/s with the default "
    "polling, 8.8 without)"
)


def speculative_decode(
    plain_seconds: float,
    verify_seconds: float,
    draft_token_seconds: float,
    n_draft: int,
    acceptance: float,
    notes: tuple[str, ...] = (),
) -> SpeculativeDecode:
    """Decode rate with a draft. ``plain_seconds``: the target's time per token alone; ``verify_seconds``: its
    time for one batch of ``n_draft + 1`` tokens; ``draft_token_seconds``: the draft's time per token."""
    if plain_seconds <= 0 or verify_seconds <= 0 or draft_token_seconds < 0 or n_draft < 0:
        raise ValueError("speculative decoding needs positive step times and a drafted-token count of 0 or more")
    per_step = expected_tokens(acceptance, n_draft)
    draft_s = n_draft * draft_token_seconds
    step = draft_s + verify_seconds
    return SpeculativeDecode(
        per_step / step, 1.0 / plain_seconds, per_step, step, draft_s, verify_seconds, n_draft, acceptance, notes
    )
