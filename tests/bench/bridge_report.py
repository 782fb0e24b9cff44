"""The bridge benchmark's verdicts and printed tables (tests/bench/bridge.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tests.bench.common import ratio

GOAL_FILES = 100_000  # the size the goals are stated at
GROWTH_FROM = 1_000
GOAL_COLD_S = {"local": 1.0, "s3": 1.5}
GOAL_COLD_GROWTH = 2.5
GOAL_INSERT_VS_STOCK = 2.0
GOAL_INSERT_GROWTH = 1.3
GOAL_WARM_OVER_STOCK_S = 0.010
GOAL_RSS_MB = 400.0


def _rows(result: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for backend in result["config"]["backends"]:
        for size in result["sizes"]:
            if backend in size["backends"]:
                yield backend, size["backends"][backend]


def slate_cold(b: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The open a user gets: from the image when one was written, else the store."""
    if "cold_s" in b["cold_image"]:
        return b["cold_image"], "image"
    return b["cold_store"], "store (no image)"


def verdicts(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The goals per backend; ``met`` is None when the run did not
    cover the size a goal is stated at (the figure is still shown)."""
    out: list[dict[str, Any]] = []
    for backend in result["config"]["backends"]:
        sizes = [s["backends"][backend] for s in result["sizes"] if backend in s["backends"]]
        if not sizes:
            continue
        first, last = sizes[0], sizes[-1]
        at_goal = last["files"] >= GOAL_FILES
        where = f"{last['files']} files"

        def add(goal: str, measured: str, met: bool | None, backend: str = backend) -> None:
            out.append({"backend": backend, "goal": goal, "measured": measured, "met": met})

        cold, how = slate_cold(last)
        limit = GOAL_COLD_S[backend]
        add(
            f"cold open-to-first-query <= {limit} s at {GOAL_FILES} files",
            f"{cold['cold_s']:.2f} s at {where} ({how})",
            cold["cold_s"] <= limit if at_goal else None,
        )
        if len(sizes) > 1:
            grow = ratio(slate_cold(last)[0]["cold_s"], slate_cold(first)[0]["cold_s"])
            official = first["files"] <= GROWTH_FROM and at_goal
            add(
                f"cold growth {GROWTH_FROM} -> {GOAL_FILES} files <= {GOAL_COLD_GROWTH}x",
                f"{grow:.2f}x ({first['files']} -> {last['files']})",
                grow <= GOAL_COLD_GROWTH if official else None,
            )
        sl, st = last["session_slate"], last["session_stock"]
        ins = ratio(sl["insert_s"], st["insert_s"])
        add(
            f"1-row INSERT <= {GOAL_INSERT_VS_STOCK:g}x stock at {GOAL_FILES} files",
            f"{ins:.2f}x at {where} ({sl['insert_s'] * 1000:.1f} vs "
            f"{st['insert_s'] * 1000:.1f} ms)",
            ins <= GOAL_INSERT_VS_STOCK if at_goal else None,
        )
        if len(sizes) > 1:
            grow = ratio(sl["insert_s"], first["session_slate"]["insert_s"])
            official = first["files"] <= GROWTH_FROM and at_goal
            add(
                f"slatelake INSERT {GROWTH_FROM} -> {GOAL_FILES} files within "
                f"{GOAL_INSERT_GROWTH}x",
                f"{grow:.2f}x ({first['files']} -> {last['files']})",
                grow <= GOAL_INSERT_GROWTH if official else None,
            )
        over = max(s["session_slate"]["warm_s"] - s["session_stock"]["warm_s"] for s in sizes)
        add(
            f"warm query <= stock + {GOAL_WARM_OVER_STOCK_S * 1000:.0f} ms (every size)",
            f"worst {over * 1000:+.1f} ms",
            over <= GOAL_WARM_OVER_STOCK_S,
        )
        rss = max(cold.get("vm_hwm_mb", 0.0), sl.get("vm_hwm_mb", 0.0))
        add(
            f"peak RSS of the session process < {GOAL_RSS_MB:.0f} MB at {GOAL_FILES} files",
            f"{rss:.0f} MB at {where} (cold open {cold.get('vm_hwm_mb', 0):.0f}, "
            f"after {result['config']['n']} INSERTs {sl.get('vm_hwm_mb', 0):.0f})",
            rss < GOAL_RSS_MB if at_goal else None,
        )
    return out


def _f(value: Any, scale: float = 1.0, digits: int = 3, width: int = 8) -> str:
    if not isinstance(value, int | float):
        return f"{'-':>{width}}"
    return f"{value * scale:>{width}.{digits}f}"


def print_report(result: dict[str, Any]) -> None:
    n = result["config"]["n"]
    print()
    print("== cold open-to-first-query (s, medians; fresh process: import, connect, count(*)) ==")
    print(
        f"  {'backend':<7} {'files':>7} | {'sl image':>8} {f'+{n} slots':>9} {'sl store':>8} "
        f"{'stock':>8} | {'img/st':>6} {'store/st':>8} | {'c+q img':>8} {'c+q st':>8} | "
        f"{'ext load':>8} {'img reads':>9}"
    )
    for backend, b in _rows(result):
        img, store, stock = b["cold_image"], b["cold_store"], b["cold_stock"]
        tail = b.get("cold_tail", {})
        print(
            f"  {backend:<7} {b['files']:>7} | {_f(img.get('cold_s'))} "
            f"{_f(tail.get('cold_s'), width=9)} {_f(store['cold_s'])} "
            f"{_f(stock['cold_s'])} | {_ratio(img.get('cold_s'), stock['cold_s']):>6} "
            f"{_ratio(store['cold_s'], stock['cold_s']):>8} | {_f(img.get('connect_query_s'))} "
            f"{_f(stock['connect_query_s'])} | {_f(b['ext_load_s'])} "
            f"{img.get('image_reads', '-'):>9}"
        )
    print(
        f"  sl image: after `slatelake image`; +{n} slots: that image and {n} slots after it; "
        "sl store: no image yet;\n  c+q: connect + first query "
        "without the imports (the earlier figure); ext load: extensions.connect() "
        "alone; img reads: ImageBook.fetch calls in the opening process"
    )
    for backend, b in _rows(result):
        for variant in ("cold_image", "cold_store"):
            if "skipped" in b[variant] or "note" in b[variant]:
                why = b[variant].get("skipped") or b[variant].get("note")
                print(f"  ! {backend} {b['files']} {variant}: {why}")
    print()
    print(f"== warm query (head unmoved) and 1-row INSERT (ms, medians of {n}) ==")
    print(
        f"  {'backend':<7} {'files':>7} | {'warm sl':>8} {'warm st':>8} {'diff':>7} | "
        f"{'ins sl':>8} {'ins st':>8} {'ratio':>6} {'ins max':>8} | wrote"
    )
    for backend, b in _rows(result):
        sl, st = b["session_slate"], b["session_stock"]
        print(
            f"  {backend:<7} {b['files']:>7} | {_f(sl['warm_s'], 1000, 2)} "
            f"{_f(st['warm_s'], 1000, 2)} {_f(sl['warm_s'] - st['warm_s'], 1000, 2, 7)} | "
            f"{_f(sl['insert_s'], 1000, 2)} {_f(st['insert_s'], 1000, 2)} "
            f"{_ratio(sl['insert_s'], st['insert_s']):>6} {_f(sl['insert_max_s'], 1000, 1)} | "
            f"sl {sl['insert_wrote']}, st {st['insert_wrote']}"
        )
    print()
    print("== peak RSS (MB, VmHWM of the process) ==")
    print(
        f"  {'backend':<7} {'files':>7} | {'cold img':>8} {'cold st':>8} {'stock':>8} | "
        f"{f'sl +{n} ins':>10} {f'st +{n} ins':>10}"
    )
    for backend, b in _rows(result):
        print(
            f"  {backend:<7} {b['files']:>7} | {_f(b['cold_image'].get('vm_hwm_mb'), 1, 0)} "
            f"{_f(b['cold_store'].get('vm_hwm_mb'), 1, 0)} "
            f"{_f(b['cold_stock'].get('vm_hwm_mb'), 1, 0)} | "
            f"{_f(b['session_slate'].get('vm_hwm_mb'), 1, 0, 10)} "
            f"{_f(b['session_stock'].get('vm_hwm_mb'), 1, 0, 10)}"
        )
    print()
    print("== catalog image: write cost (`slatelake image`, its own process) ==")
    print(
        f"  {'backend':<7} {'files':>7} | {'first':>7} {'MB':>6} {'proc s':>7} {'RSS MB':>7} | "
        f"{f'fold {n} slots':>13} {'RSS MB':>7} | {'image s':>7} {'MB':>6} {'RSS MB':>7}"
    )
    for backend, b in _rows(result):
        first, holder = b["image"], b["holder"]
        fold, again = holder["fold"], holder["image"]
        print(
            f"  {backend:<7} {b['files']:>7} | {_f(first.get('seconds'), 1, 2, 7)} "
            f"{_f(first.get('bytes'), 1e-6, 2, 6)} {_f(first.get('process_wall_s'), 1, 2, 7)} "
            f"{_f(first.get('peak_rss_mb'), 1, 0, 7)} | {_f(fold['process_wall_s'], 1, 2, 13)} "
            f"{_f(fold['peak_rss_mb'], 1, 0, 7)} | {_f(again.get('seconds'), 1, 2, 7)} "
            f"{_f(again.get('bytes'), 1e-6, 2, 6)} {_f(again.get('peak_rss_mb'), 1, 0, 7)}"
        )
    print(
        "  first: the image right after the build (the command's own seconds; proc s: the "
        "whole process);\n  then, after the INSERTs: `slatelake fold` (process wall) and a new "
        "image: a holder pays about fold + image s per image"
    )
    print()
    print("== where a cold slatelake open spends its time (s, medians; nested calls overlap) ==")
    for backend, b in _rows(result):
        for variant in ("cold_image", "cold_tail", "cold_store"):
            v = b.get(variant, {})
            if "phases_s" not in v:
                continue
            phases = " ".join(f"{k} {t:.3f}" for k, t in sorted(v["phases_s"].items()))
            calls = ", ".join(f"{k} {c:g}" for k, c in sorted(v.get("store_calls", {}).items()))
            print(
                f"  {backend} {b['files']} {variant[5:]}: import {v['import_s']:.3f} "
                f"connect {v['connect_s']:.3f} query {v['query_s']:.3f} | {phases}"
            )
            print(f"      object calls: {calls or 'none'}")
    _print_session_phases(result)
    _print_builds(result)
    print()
    print("== goals (catalog images) ==")
    for v in result["verdicts"]:
        met = {True: "MET", False: "MISSED", None: "n/a"}[v["met"]]
        print(f"  [{met:>6}] {v['backend']:<5} {v['goal']}: {v['measured']}")
    _print_profiles(result)
    lib = result["library"]
    dirty = f", uncommitted: {' '.join(x.split()[-1] for x in lib['uncommitted'])}"
    print(f"\nlibrary at {lib['commit']}{dirty if lib['uncommitted'] else ''}")
    print(
        f"wall {result['wall_s']:.0f}s; driver peak RSS {result['driver_peak_rss_mb']:.0f} MB"
        + (f"; moto {result['moto_peak_rss_mb']:.0f} MB" if "moto_peak_rss_mb" in result else "")
    )


def _ratio(a: Any, b: Any) -> str:
    if not isinstance(a, int | float) or not isinstance(b, int | float):
        return "-"
    return f"{ratio(a, b):.1f}x"


def _print_session_phases(result: dict[str, Any]) -> None:
    print()
    print("== slatelake per statement (mean ms in each probe) and object calls per statement ==")
    for backend, b in _rows(result):
        sl = b["session_slate"]
        for what in ("warm", "insert"):
            phases = " ".join(f"{k} {t:.2f}" for k, t in sorted(sl[f"{what}_phases_ms"].items()))
            calls = ", ".join(f"{k} {c:g}" for k, c in sorted(sl[f"{what}_store_calls"].items()))
            print(f"  {backend} {b['files']} {what}: {phases or '-'} | {calls or 'no calls'}")


def _print_builds(result: dict[str, Any]) -> None:
    print()
    print("== building (not goals) ==")
    print(
        f"  {'backend':<7} {'files':>7} | {'stock s':>7} {'reused':>6} | {'upload s':>8} | "
        f"{'import s':>8} {'keys':>8} | {'marker s':>8} {'fold s':>6}"
    )
    for size in result["sizes"]:
        rec = size["stock_build"]
        for backend, b in size["backends"].items():
            built = b["slate_build"]
            print(
                f"  {backend:<7} {b['files']:>7} | {rec['seconds']:>7.1f} "
                f"{'yes' if rec.get('reused') else 'no':>6} | "
                f"{_f(b.get('upload', {}).get('seconds'), 1, 1)} | "
                f"{built['import']['seconds']:>8.2f} {built['import']['keys']:>8} | "
                f"{built['mark']['seconds']:>8.2f} {built['fold_wall_s']:>6.2f}"
            )


def _print_profiles(result: dict[str, Any]) -> None:
    for backend, b in _rows(result):
        prof = b.get("profile")
        if not prof:
            continue
        print()
        print(
            f"== profile, {backend}, {b['files']} files: a cold open "
            f"({prof['cold']['connect_query_s']:.2f}s under the profiler) =="
        )
        for thread, text in prof["cold"].get("profile", {}).items():
            print(f"-- cold open, {thread}")
            print(_trim(text))
        ins = prof["insert"]
        print()
        print(
            f"== profile, {backend}, {b['files']} files: {ins['inserts']} 1-row INSERTs "
            f"({ins['seconds_profiled']:.2f}s under the profiler) =="
        )
        for thread, text in ins["top"].items():
            print(f"-- insert, {thread}")
            print(_trim(text))


def _trim(text: str) -> str:
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if "ncalls" in line), 0)
    return "\n".join(lines[max(0, start - 3) :]).rstrip()
