"""proxy, wrap, requests: see and steer an agent on the Anthropic or OpenAI API through a local proxy."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from workbench.commands._common import EXIT_ERROR, EXIT_OK, AddCommand, Environment
from workbench.engine.errors import WorkbenchError

if TYPE_CHECKING:
    from workbench.engine.plans.fact_check import FactCheck
    from workbench.engine.settings.config import Config
    from workbench.proxy.exchange import Exchange
    from workbench.proxy.server import ProxyServer


def register(add: AddCommand) -> None:
    p = add("proxy", "serve a local proxy (Anthropic Messages, OpenAI Responses and Chat Completions APIs) that "
                     "records and steers every request", cmd_proxy)
    _server_options(p)
    p.add_argument("--headless", action="store_true", help="print one line per request instead of opening the TUI")
    p.add_argument("--json", action="store_true", help="with --headless: one JSON object per request")
    p.add_argument("--listen", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    p.add_argument("--listen-anywhere", action="store_true",
                   help="allow a non-loopback --listen address (the proxy forwards the keys clients send)")

    w = add("wrap", "run an agent through the proxy: workbench wrap -- claude -p '...' (or codex exec, "
                    "opencode run, aider)", cmd_wrap)
    _server_options(w, default_port=0)
    w.add_argument("--json", action="store_true", help="print each request as a JSON object on stderr")
    w.add_argument("agent", nargs=argparse.REMAINDER, help="the command to run, after --")

    r = add("requests", "list the requests of a proxied session, or print one as it was sent", cmd_requests)
    r.add_argument("session", help="stored session id")
    r.add_argument("seq", nargs="?", type=int, help="print this request's body (JSON) as the model received it")
    r.add_argument("--diff", action="store_true",
                   help="with N: request N against the one before it: messages added, blocks the workbench "
                        "replaced, blocks the agent changed or dropped, the usage and cost of each")
    r.add_argument("--json", action="store_true", help="the list, or the diff, as JSON")


def _server_options(p: argparse.ArgumentParser, default_port: int | None = None) -> None:
    p.add_argument("--exact", action="store_true",
                   help="make each proxied session's system prompt and tool counts exact with the API's "
                        "count_tokens (with the client's own key; at most once a minute per session)")
    from_env = os.environ.get("ANTHROPIC_BASE_URL") or "https://api.anthropic.com"
    p.add_argument("--port", type=int, default=8788 if default_port is None else default_port,
                   help="port on 127.0.0.1 (default: 8788; wrap: a free one)")
    p.add_argument("--upstream", default=from_env,
                   help="the API to forward to (default: $ANTHROPIC_BASE_URL or https://api.anthropic.com)")
    p.add_argument("--policy", help="prune the agents' contexts by this policy when it pays (`default`, or one "
                                    "of the config's [policies]; default: [proxy] policy, else none)")
    openai = os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"
    p.add_argument("--openai-upstream", default=openai,
                   help="the OpenAI API to forward /v1/responses and /v1/chat/completions to (Codex CLI, Aider, "
                        "OpenCode; default: $OPENAI_BASE_URL or https://api.openai.com/v1)")


def _line(exchange: Exchange) -> str:
    placement = exchange.placement
    where = f"{placement.thread.session_id} #{exchange.seq}" if placement else "(unplaced)"
    body = exchange.parsed or {}
    parts = [where, str(body.get("model", "?")), f"{len(body.get('messages') or [])} msgs"]
    usage = exchange.answer.usage if exchange.answer else None
    if usage is not None:
        parts.append(f"in {usage.total_input:,} (cache read {usage.cache_read_input_tokens:,}, "
                     f"write {usage.cache_creation_input_tokens:,})")
        parts.append(f"out {usage.output_tokens:,}")
    parts.append(exchange.outcome or str(exchange.status))
    if exchange.edited:
        parts.append("steered")
    if exchange.warning:
        parts.append(f"warning: {exchange.warning}")
    return " · ".join(parts)


def _record(exchange: Exchange) -> dict[str, object]:
    usage = exchange.answer.usage if exchange.answer else None
    return {
        "session": exchange.placement.thread.session_id if exchange.placement else None,
        "seq": exchange.seq, "model": (exchange.parsed or {}).get("model"), "status": exchange.status,
        "messages": len((exchange.parsed or {}).get("messages") or []), "steered": exchange.edited,
        "usage": usage.model_dump(exclude={"synthetic"}) if usage else None, "warning": exchange.warning,
        "outcome": exchange.outcome,
    }


def agent_summary_check(db: Path, config: Config, session_id: str) -> FactCheck | None:
    """Which facts of what a proxied agent's latest compaction replaced its own summary kept (None: unknown)."""
    from workbench.engine.context.session import SessionContext
    from workbench.engine.plans.fact_check import latest_check
    from workbench.engine.transcript.store import Store

    with Store(db) as store:
        ctx = SessionContext.load(store, session_id, config)
    return latest_check(ctx)


def lost_line(kept: FactCheck, shown: int = 5) -> str:
    """``the agent's summary kept 3 of 7 facts; lost: file read setup.py; …``."""
    text = f"the agent's summary kept {kept.kept} of {kept.total} facts"
    if kept.lost:
        more = len(kept.lost) - shown
        text += "; lost: " + "; ".join(f"{f.kind} {f.text}" for f in kept.lost[:shown])
        text += f"; and {more} more (workbench compactions SESSION --json)" if more > 0 else ""
    return text


def reporter(db: Path, config: Config, as_json: bool, stream: TextIO) -> Callable[[Exchange], None]:
    """One line (or JSON object) per request; after the agent compacted, what its summary lost."""

    def report(exchange: Exchange) -> None:
        placement = exchange.placement
        kept = agent_summary_check(db, config, placement.thread.session_id) if placement and placement.pivot \
            else None
        if as_json:
            record = _record(exchange)
            if kept is not None:
                record["facts"] = kept.as_json()
            text = json.dumps(record)
        else:
            text = _line(exchange) + (f" · {lost_line(kept)}" if kept is not None else "")
        print(text, file=stream, flush=True)

    return report


def _server(env: Environment, args: argparse.Namespace, host: str, anywhere: bool,
            as_json: bool, stream: TextIO | None) -> ProxyServer:
    """The proxy, reporting each request on ``stream`` (None: not at all, the workbench shows them)."""
    from workbench.proxy.recorder import Recorder  # the HTTP stack loads only for the commands that serve
    from workbench.proxy.server import ProxyServer, ProxySettings

    report = reporter(env.db_path, env.config, as_json, stream) if stream is not None else None

    settings = ProxySettings(db_path=env.db_path, upstream=args.upstream, openai_upstream=args.openai_upstream,
                             host=host, port=args.port,
                             listen_anywhere=anywhere, exact=args.exact)
    def warn(text: str) -> None:
        print(f"workbench proxy: {text}", file=sys.stderr, flush=True)

    recorder = Recorder(env.db_path, report=report, warn=warn if stream is not None else None)
    name = args.policy or env.config.proxy.policy
    if name:
        from workbench.engine.plans.replay import policy_named

        recorder.run_policy(policy_named(name, env.config.policies), env.config)
    return ProxyServer(settings, recorder)


def cmd_proxy(env: Environment, args: argparse.Namespace) -> int:
    if not (args.headless or args.json) and sys.stdout.isatty():
        return _view(env, args)
    from workbench.proxy.server import stopping

    server = _server(env, args, args.listen, args.listen_anywhere, args.json, sys.stdout)

    def ready() -> None:
        if args.json:
            print(json.dumps({"ready": True, "url": server.url, "port": server.port,
                              "upstream": server.proxy.upstream, "db": str(env.db_path)}), flush=True)
        else:
            print(f"workbench proxy on {server.url} → {server.proxy.upstream}; storing in {env.db_path}", flush=True)
            print(f"point an agent at it: ANTHROPIC_BASE_URL={server.url} claude", flush=True)

    def at_once() -> None:
        open_now = server.proxy.in_flight
        print(f"workbench: stopped at once: {open_now} request(s) under way and any answers not yet written "
              f"were not stored in {env.db_path}", file=sys.stderr, flush=True)
        os._exit(EXIT_ERROR)

    with stopping(server, at_once):
        try:
            server.serve(ready)
        finally:
            server.recorder.close()
        _checkpoint(env)
    return EXIT_OK


def _checkpoint(env: Environment) -> None:
    from workbench.proxy.server import checkpoint

    if (failed := checkpoint(env.db_path)) is not None:
        print(f"workbench: warning: {failed}", file=sys.stderr)


def _view(env: Environment, args: argparse.Namespace) -> int:
    """The proxy in the background, the workbench in front: each agent's session as its requests arrive."""
    from workbench.commands.app import load_app, run

    load_app()
    from workbench.tui.launch import Launch

    server = _server(env, args, args.listen, args.listen_anywhere, False, None).start()
    try:
        policy = server.recorder.policy.policy.name if server.recorder.policy is not None else None
        return run(Launch.proxy(env.db_path, server.url, env.config, policy))
    finally:
        server.stop()
        server.recorder.close()
        _checkpoint(env)


def cmd_wrap(env: Environment, args: argparse.Namespace) -> int:
    agent = args.agent[1:] if args.agent[:1] == ["--"] else args.agent
    if not agent:
        raise WorkbenchError("wrap needs a command to run: workbench wrap -- claude -p '...'")
    from workbench.commands._wrap_clients import plan

    wrap = plan(agent)
    args.openai_upstream = wrap.openai_upstream or args.openai_upstream
    args.upstream = wrap.anthropic_upstream or args.upstream
    server = _server(env, args, "127.0.0.1", False, args.json, sys.stderr).start()
    command, child_env = wrap.launch(agent, server.url, os.environ)
    print(wrap.said(server.url), file=sys.stderr, flush=True)
    try:
        code = subprocess.run(command, env=child_env, check=False).returncode
    except OSError as exc:
        code = EXIT_ERROR
        print(f"workbench: error: cannot run {agent[0]}: {exc.strerror or exc}", file=sys.stderr)
    finally:
        server.stop()
        server.recorder.close()
        _checkpoint(env)
    sessions = sorted({t.session_id for group in server.recorder.threads.groups().values() for t in group})
    for session_id in sessions:
        print(f"workbench: stored session {session_id} in {env.db_path}", file=sys.stderr)
    return code


def _api_edit(edit: dict[str, Any]) -> str:
    """``API cleared 3 tool uses, 12,000 input tokens``: what the API's own context editing removed."""
    cleared = [f"{value:,} {name.removeprefix('cleared_').replace('_', ' ')}" for name, value in edit.items()
               if name.startswith("cleared_") and isinstance(value, int)]
    return f"API cleared {', '.join(cleared)}" if cleared else f"API edit {edit.get('type', '?')}"


def cmd_requests(env: Environment, args: argparse.Namespace) -> int:
    from workbench.engine.transcript.request_store import list_requests, request_body

    if args.diff:
        if args.seq is None:
            raise WorkbenchError("--diff needs a request number: workbench requests SESSION N --diff")
        from workbench.commands.sent import print_diff

        print_diff(env, args.session, args.seq, as_json=args.json)
        return EXIT_OK
    with env.store() as store:
        store.get_session(args.session)
        if args.json and args.seq is None:
            from workbench.engine.context.request_diff import facts_json, session_requests

            print(json.dumps([facts_json(facts) for facts in session_requests(store, args.session)]))
            return EXIT_OK
        if args.seq is not None:
            try:
                print(json.dumps(request_body(store, args.session, args.seq), indent=1, ensure_ascii=False))
            except KeyError as exc:
                raise WorkbenchError(str(exc.args[0])) from None
            return EXIT_OK
        for row in list_requests(store, args.session):
            usage = row.usage
            numbers = (f"in {usage.total_input:,} · cache read {usage.cache_read_input_tokens:,} · "
                       f"out {usage.output_tokens:,}") if usage else "no usage"
            flags = " · steered" if row.edited else ""
            flags += "".join(f" · {_api_edit(edit)}" for edit in row.api_edits)
            print(f"#{row.seq}  {row.created_at[:19]}  {row.model or '?'}  {row.messages} msgs  "
                  f"max_tokens {row.max_tokens}  {numbers}  {row.outcome or f'HTTP {row.status}'}{flags}")
    return EXIT_OK
