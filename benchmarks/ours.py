"""Fast replay of our pipeline alone: ``python -m benchmarks.ours [--windows ...] [--detail]``.

Replays every transcript through no management, the hook (carried summary), the
LCEL chain and the default pipeline (no summarizer) at 32k and 16k, without the
peers, real tokenizers, the token corpus or the scaling runs, and prints for each
configuration its cost as a share of no management, summarizer calls, retention at
the final request, the cached share and the most expensive transcript. The figures
are computed as ``benchmarks.run`` computes them; nothing is written.
"""

from __future__ import annotations

import argparse
import time

from benchmarks.collect import WINDOWS, stats_dict
from benchmarks.data import load_transcripts
from benchmarks.replay import replay
from benchmarks.strategies import NoManagement, OursChain, OursCondense, OursDefault

KEYS = ("ours_condense", "ours_lcel", "ours_default")


def _pct(value: float | None) -> str:
    return "  n/a" if value is None else f"{100 * value:5.1f}%"


def main(argv: list[str] | None = None) -> int:
    """Replay and print one line per configuration and window."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.ours", description=__doc__)
    parser.add_argument(
        "--windows",
        default=",".join(str(w) for w in WINDOWS),
        help="comma-separated windows in tokens (default: %(default)s)",
    )
    parser.add_argument("--detail", action="store_true", help="one line per transcript too")
    args = parser.parse_args(argv)
    transcripts = load_transcripts(None, None)
    strategies = (NoManagement, OursCondense, OursChain, OursDefault)
    for window in (int(w) for w in args.windows.split(",")):
        began = time.perf_counter()
        result = replay(transcripts, window, None, strategies)
        base = result.runs["none"]
        print(f"== {window:,} tokens, {len(transcripts)} transcripts")
        for key in KEYS:
            total = stats_dict(result.total(key), result.total("none"), False)
            shares = {
                name: stats_dict(stats, base[name], False)["cost_share"] or 0.0
                for name, stats in result.runs[key].items()
            }
            worst = max(shares, key=lambda name: shares[name])
            kept = total["retention"]
            print(
                f"{key:14} cost {_pct(total['cost_share'])}  calls {total['summarizer_calls']:3}"
                f"  args {_pct(kept['args'])}  users {_pct(kept['users'])}"
                f"  cached {_pct(total['cached_share'])}  overflows {total['overflows']}"
                f"  orphans {total['orphans']}  errors {total['errors']}"
                f"  worst {_pct(shares[worst])} ({worst})"
            )
            if args.detail:
                for name, stats in sorted(result.runs[key].items()):
                    print(
                        f"    {name:44} cost {_pct(shares[name])}"
                        f"  calls {stats.summarizer_calls:2}  requests {stats.requests:4}"
                    )
        print(f"({time.perf_counter() - began:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
