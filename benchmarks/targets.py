"""The targets of issues 5, 18 and 19, checked against the gathered figures."""

from __future__ import annotations

from typing import Any

TARGET_STRATEGIES = ("ours_condense", "ours_default")
"""Our budgeted configurations, held to the targets (prune only promises no budget)."""

COST_VS_PEER = 0.7
COST_VS_NONE = 0.5
CALLS_SHARE = 1 / 3
RETENTION = 0.95
NOOP_RATIO = 1.0
PRUNE_RATIO = 2.0
"""Issue 18: the prune path, called turn after turn (the Pruner's memo warm)."""
PRUNE_COLD_RATIO = 5.0
"""Issue 18: the prune path's first call on a history (cold, and on new message objects)."""
GROWTH = 11.0

_RETENTION_PARTS = {
    "args": "tool-call paths/commands/queries",
    "users": "user messages",
    "result": "latest test/build result",
}


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def _row(
    target: str, window: str, strategy: str, value: str, need: str, met: bool, note: str = ""
) -> dict[str, Any]:
    return {
        "target": target,
        "window": window,
        "strategy": strategy,
        "value": value,
        "need": need,
        "met": met,
        "note": note,
    }


def evaluate(out: dict[str, Any]) -> list[dict[str, Any]]:
    """Return one row per target, window and strategy: the value, the bar, met or not."""
    rows: list[dict[str, Any]] = []
    config = out["config"]["strategies"]
    peers = [k for k, v in config.items() if not v["ours"] and k != "none"]
    summarising = [k for k in peers if config[k]["summarises"]]
    for window, data in out["windows"].items():
        label = f"{int(window) // 1000}k"
        totals = data["totals"]
        best_peer = min(peers, key=lambda k: totals[k]["cost_share"])
        best_cost = totals[best_peer]["cost_share"]
        sound = [k for k in peers if totals[k]["overflows"] == 0 and totals[k]["task_lost"] == 0]
        sound_note = (
            "peers that never overflow and never lose the task: "
            + (
                ", ".join(f"{config[k]['label']} {_pct(totals[k]['cost_share'])}" for k in sound)
                or "none"
            )
            + f"; {config[best_peer]['label']} lost the task in "
            f"{totals[best_peer]['task_lost']} of {totals[best_peer]['requests']} requests"
        )
        for key in TARGET_STRATEGIES:
            if key not in totals:
                continue
            mine = totals[key]
            name = config[key]["label"]
            rows.append(
                _row(
                    "cost >= 30% below the best peer",
                    label,
                    name,
                    _pct(mine["cost_share"]),
                    f"<= {_pct(COST_VS_PEER * best_cost)} (best peer: "
                    f"{config[best_peer]['label']} {_pct(best_cost)})",
                    mine["cost_share"] <= COST_VS_PEER * best_cost,
                    sound_note,
                )
            )
            rows.append(
                _row(
                    "cost >= 50% below no management",
                    label,
                    name,
                    _pct(mine["cost_share"]),
                    f"<= {_pct(COST_VS_NONE)}",
                    mine["cost_share"] <= COST_VS_NONE,
                )
            )
            if summarising:
                note = "; ".join(
                    f"{config[k]['label']}: {totals[k]['summarizer_calls']} calls, "
                    f"{totals[k]['summaries_written']} summaries written"
                    for k in summarising
                )
                fewest = min(summarising, key=lambda k: totals[k]["summarizer_calls"])
                bar = totals[fewest]["summarizer_calls"] * CALLS_SHARE
                rows.append(
                    _row(
                        "summarizer calls <= 1/3 of the best summarising peer",
                        label,
                        name,
                        str(mine["summarizer_calls"]),
                        f"<= {bar:.1f} ({config[fewest]['label']})",
                        mine["summarizer_calls"] <= bar,
                        note,
                    )
                )
                modelled = [
                    k
                    for k in summarising
                    if totals[k]["summarizer_calls"] >= totals[k]["summaries_written"]
                    and totals[k]["summarizer_calls"] > 0
                ]
                if modelled and modelled != [fewest]:
                    fewest = min(modelled, key=lambda k: totals[k]["summarizer_calls"])
                    bar = totals[fewest]["summarizer_calls"] * CALLS_SHARE
                    rows.append(
                        _row(
                            "... same, among peers whose every summary came from the model",
                            label,
                            name,
                            str(mine["summarizer_calls"]),
                            f"<= {bar:.1f} ({config[fewest]['label']})",
                            mine["summarizer_calls"] <= bar,
                            "SummarizationMiddleware mostly writes a canned text without a call",
                        )
                    )
            peer_overflows = ", ".join(
                f"{config[k]['label']}: {totals[k]['overflows']}" for k in peers
            )
            rows.append(
                _row(
                    "zero overflows",
                    label,
                    name,
                    f"{mine['overflows']} (largest {mine['max_input']:,} / {int(window):,})",
                    "0",
                    mine["overflows"] == 0,
                    "peers: " + peer_overflows,
                )
            )
            peer_pairs = ", ".join(
                f"{config[k]['label']}: {totals[k]['orphans']}/{totals[k]['unanswered']}"
                for k in peers
            )
            rows.append(
                _row(
                    "zero orphan tool results and unanswered calls",
                    label,
                    name,
                    f"{mine['orphans']} / {mine['unanswered']}",
                    "0 / 0",
                    mine["orphans"] == 0 and mine["unanswered"] == 0,
                    "peers (orphans/unanswered): " + peer_pairs,
                )
            )
            for part, what in _RETENTION_PARTS.items():
                value = mine["retention"][part]
                best_other = max(peers, key=lambda k, p=part: totals[k]["retention"][p] or 0.0)
                other = totals[best_other]["retention"][part] or 0.0
                rows.append(
                    _row(
                        f"retention of {what} >= 95% and >= every peer",
                        label,
                        name,
                        _pct(value),
                        f">= {_pct(max(RETENTION, other))} (best peer: "
                        f"{config[best_other]['label']} {_pct(other)})",
                        value is not None and value >= RETENTION and value >= other,
                    )
                )
    scaling = out.get("scaling")
    if scaling:
        for op, bar, what in (
            ("ours_noop", NOOP_RATIO, "no-op path <= 1.0x count_tokens_approximately"),
            ("ours_prune", PRUNE_RATIO, "prune path <= 2x count_tokens_approximately"),
            (
                "ours_prune_cold",
                PRUNE_COLD_RATIO,
                "prune path, its Pruner's memo emptied (cold), <= 5x",
            ),
            (
                "ours_prune_fresh",
                PRUNE_COLD_RATIO,
                "prune path on a history just loaded (new message objects), <= 5x",
            ),
        ):
            if any(op not in r["ops"] for r in scaling["sizes"]):
                continue  # a results file from before the operation was measured
            ratios = {r["messages"]: r["ops"][op]["ratio_to_count"] for r in scaling["sizes"]}
            by_min = {
                r["messages"]: r["ops"][op].get("ratio_to_count_min") for r in scaling["sizes"]
            }
            worst = max(ratios.values())
            rows.append(
                _row(
                    what,
                    "-",
                    "ours",
                    ", ".join(f"{n:,}: {x:.2f}x" for n, x in ratios.items()),
                    f"<= {bar:.1f}x at every size",
                    worst <= bar,
                    "by min time: "
                    + ", ".join(f"{n:,}: {x:.2f}x" for n, x in by_min.items() if x is not None),
                )
            )
        for op in ("ours_noop", "ours_prune"):
            growth = scaling["growth_1k_to_10k"].get(op)
            ref = scaling["growth_1k_to_10k"].get("count_tokens_approximately")
            by_min = scaling.get("growth_1k_to_10k_min", {})
            rows.append(
                _row(
                    f"{op.replace('ours_', '')} path: 1,000 -> 10,000 messages <= 11x",
                    "-",
                    "ours",
                    "n/a" if growth is None else f"{growth:.2f}x",
                    f"<= {GROWTH:.0f}x",
                    growth is not None and growth <= GROWTH,
                    ("" if ref is None else f"count_tokens_approximately: {ref:.2f}x")
                    + (
                        f"; by min time: {by_min[op]:.2f}x (count_tokens_approximately "
                        f"{by_min.get('count_tokens_approximately') or 0:.2f}x)"
                        if by_min.get(op)
                        else ""
                    ),
                )
            )
    return rows
