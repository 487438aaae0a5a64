"""The work behind ``workbench compact`` and ``workbench compactions`` (see ``compact.py``)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from workbench.commands._common import EXIT_OK, Environment, resolve, warn_skipped
from workbench.commands._price import print_price
from workbench.engine.context.session import SessionContext
from workbench.engine.errors import WorkbenchError
from workbench.engine.plans.compaction import CompactionPreview, CompactionResult, Compactor, NothingToCompact
from workbench.engine.plans.compaction_history import CompactionEntry, compaction_history, undo_compaction
from workbench.engine.plans.edit_price import EditPrice, compaction_price
from workbench.engine.plans.fact_check import FactCheck, check, past_checks, preview_facts
from workbench.engine.providers.base import Provider
from workbench.engine.settings.compaction import SummarizerChoice
from workbench.engine.settings.config import Config
from workbench.engine.transcript.store import Store

DEFAULT_LLM_MODEL = "claude-sonnet-4-5"



def _open(env: Environment, store: Store, args: argparse.Namespace) -> SessionContext:
    session_id, skipped = resolve(store, args.target, args.format)
    if not args.json:
        warn_skipped(skipped)
    return SessionContext.load(store, session_id, env.config, use_checkpoint=True)


def _provider(choice: SummarizerChoice, config: Config, ctx: SessionContext) -> Provider | None:
    """The LLM summariser when asked for (``AnthropicProvider.summariser_for``, as the app's)."""
    if choice != "llm":
        return None
    from workbench.engine.providers.anthropic import AnthropicProvider  # the SDK loads only when used

    return AnthropicProvider.summariser_for(config.provider, ctx.session)


def _load_plan(path: Path) -> CompactionPreview:
    try:
        return CompactionPreview.model_validate_json(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise WorkbenchError(f"cannot read plan {path}: {exc}") from exc
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise WorkbenchError(f"{path} is not a compaction plan: {where}: {first['msg']}") from exc


def _stream_to_stderr(text: str) -> None:
    sys.stderr.write(text)
    sys.stderr.flush()


async def _preview(compactor: Compactor, args: argparse.Namespace, choice: SummarizerChoice) -> CompactionPreview:
    if args.plan is not None:
        return _load_plan(args.plan)
    live = choice == "llm" and not args.json and sys.stderr.isatty()
    if choice == "llm" and not args.json:
        print(f"summarising with {compactor.model} …", file=sys.stderr)
    plan = await compactor.preview("manual", args.focus, summarizer=choice,
                                   on_delta=_stream_to_stderr if live else None)
    if live:
        print(file=sys.stderr)
    return plan


@dataclass(frozen=True, slots=True)
class _Outcome:
    plan: CompactionPreview
    result: CompactionResult | None
    refused: str | None
    """Why it was not applied when it would not make the context smaller."""
    price: EditPrice | None
    """What it does to a proxied agent's prompt cache."""
    facts: FactCheck
    """Which facts of the summarised messages the summary keeps."""


async def _compact(env: Environment, store: Store, args: argparse.Namespace) -> _Outcome:
    """Make the plan, check its summary's facts, and apply it when asked."""
    ctx = _open(env, store, args)
    configured = env.config.compaction.summarizer
    # No API call unless asked:
    choice: SummarizerChoice = args.summarizer or ("heuristic" if configured == "auto" else configured)
    model = args.model or env.config.compaction.model or ctx.model or DEFAULT_LLM_MODEL
    compactor = Compactor(store, ctx, env.config.compaction, provider=_provider(choice, env.config, ctx), model=model,
                          workspace=args.workspace.resolve() if args.workspace else None)
    if args.model:
        compactor.model = args.model  # the command line wins over compaction.model
    refused: str | None = None
    try:
        plan = await _preview(compactor, args, choice)
        facts = check(preview_facts(ctx, plan.summarized), plan.summary)  # before applying adds to the session
        price = compaction_price(store, ctx, plan.plan, plan.summarized)
        try:
            result = await compactor.apply(plan) if args.apply else None
        except NothingToCompact as exc:  # nothing to do is not a failure: the context is left as it is
            result, refused = None, str(exc)
    finally:
        aclose = getattr(compactor.provider, "aclose", None)
        if aclose is not None:
            await aclose()  # the HTTP client, while its event loop still runs
    return _Outcome(plan, result, refused, price, facts)


def _print_facts(facts: FactCheck) -> None:
    """``facts: kept N of M`` and the lost ones by kind, each with its message."""
    print(f"facts: the summary {facts.figure().replace('kept', 'keeps')} facts of the summarised messages")
    for kind, lost in facts.lost_by_kind().items():
        print(f"  lost {kind}: " + "; ".join(f"{f.text} ({f.message_id})" for f in lost))


def _print_plan(plan: CompactionPreview, result: CompactionResult | None = None) -> None:
    print(f"compaction plan {plan.plan_id} ({plan.trigger}, summariser: {plan.summarizer}"
          f"{f', model {plan.model}' if plan.model else ''})")
    if result is None:
        print(f"tokens: {plan.before_tokens:,} → {plan.after_tokens:,} (estimated)")
    elif (result.before_tokens, result.after_tokens) == (plan.before_tokens, plan.after_tokens):
        print(f"tokens: {result.before_tokens:,} → {result.after_tokens:,}")
    else:  # an edited or older plan: its own figure no longer describes the context it made
        print(f"tokens: {result.before_tokens:,} → {result.after_tokens:,} "
              f"(the plan estimated {plan.before_tokens:,} → {plan.after_tokens:,} when it was made)")
    budget = "a message count" if plan.tail_budget is None else f"{plan.tail_budget:,} tokens"
    print(f"summarised {len(plan.summarized)} messages · preserved {len(plan.preserved)} · "
          f"kept {len(plan.tail)} recent ({plan.split_rule} rule, tail budget {budget})")
    if plan.metadata.plan_files:
        print(f"plan files re-injected on the next request: {', '.join(plan.metadata.plan_files)}")
    print()
    print(plan.summary)


def compact_command(env: Environment, args: argparse.Namespace) -> int:
    if args.plan is not None and not args.apply:
        raise WorkbenchError("--plan goes with --apply")
    with env.store() as store:
        if args.undo:
            ctx = _open(env, store, args)
            entry = undo_compaction(store, ctx)
            _print_undo(entry, args.json)
            return EXIT_OK
        outcome = asyncio.run(_compact(env, store, args))
    plan, result, refused, price = outcome.plan, outcome.result, outcome.refused, outcome.price
    if args.json:
        out: dict[str, Any] = plan.preview_json()
        out["facts"] = outcome.facts.as_json()
        if price is not None:
            out["cache"] = price.as_json()
        if result is not None:
            out.update(applied=True, result=result.model_dump(mode="json"))
        elif refused is not None:
            out.update(applied=False, reason=refused)
        print(json.dumps(out))
        return EXIT_OK
    for warning in plan.warnings + (result.warnings if result else []):
        print(f"warning: {warning}", file=sys.stderr)
    _print_plan(plan, result)
    print()
    _print_facts(outcome.facts)
    if price is not None:
        print()
        print_price(price)
    if result is not None:
        print(f"\napplied: {result.before_tokens:,} → {result.after_tokens:,} tokens "
              f"(undo with: workbench compact {args.target} --undo)")
    elif refused is not None:
        print(f"\nnot applied: {refused}")
    return EXIT_OK


def _print_undo(entry: CompactionEntry, as_json: bool) -> None:
    if as_json:
        print(json.dumps(entry.model_dump(mode="json")))
    else:
        print(f"undid compaction {entry.plan_id} ({entry.trigger}, {entry.summarizer}); "
              f"the context is back to {entry.before_tokens or 0:,} tokens")


def _row(entry: CompactionEntry, facts: FactCheck | None) -> str:
    when = entry.created_at.strftime("%Y-%m-%d %H:%M:%S") if entry.created_at else "?"
    tokens = f"{entry.before_tokens:,}" if entry.before_tokens is not None else "?"
    after = f"{entry.after_tokens:,}" if entry.after_tokens is not None else "?"
    count = str(entry.summarized) if entry.summarized is not None else "?"
    state = "undone" if entry.undone else "applied"
    kept = facts.figure() if facts is not None else "—"
    return (f"{when}  {entry.trigger:<9} {entry.summarizer:<26} {tokens:>9} → {after:<9} {count:>6} msgs  "
            f"{kept:<16} {state:<7}  {entry.plan_id}")


def compactions_command(env: Environment, args: argparse.Namespace) -> int:
    with env.store() as store:
        ctx = _open(env, store, args)
    entries = compaction_history(ctx)
    checks = [c for _, c in past_checks(ctx)]  # one per compaction, in the history's order
    if args.json:
        print(json.dumps([{**e.model_dump(mode="json"), "facts": c.as_json() if c else None}
                          for e, c in zip(entries, checks, strict=True)]))
        return EXIT_OK
    if not entries:
        print("no compactions")
        return EXIT_OK
    print(f"{'time':<19}  {'trigger':<9} {'summariser':<26} {'before':>9}   {'after':<9} {'summarised':>11}  "
          f"{'facts':<16} {'state':<7}  plan")
    for entry, facts in zip(entries, checks, strict=True):
        print(_row(entry, facts))
    return EXIT_OK
