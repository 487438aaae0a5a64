"""proxy, wrap, requests: see and steer an agent on the Anthropic API through a local proxy."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from typing import TYPE_CHECKING, Any, TextIO

from workbench.commands._common import EXIT_ERROR, EXIT_OK, AddCommand, Environment
from workbench.engine.errors import WorkbenchError

if TYPE_CHECKING:
    from workbench.proxy.exchange import Exchange
    from workbench.proxy.server import ProxyServer


def register(add: AddCommand) -> None:
    p = add("proxy", "serve a local Messages API proxy that records and steers every request", cmd_proxy)
    _server_options(p)
    p.add_argument("--headless", action="store_true", help="print one line per request instead of opening the TUI")
    p.add_argument("--json", action="store_true", help="with --headless: one JSON object per request")
    p.add_argument("--listen", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    p.add_argument("--listen-anywhere", action="store_true",
                   help="allow a non-loopback --listen address (the proxy forwards the keys clients send)")

    w = add("wrap", "run an agent through the proxy: workbench wrap -- claude -p '...'", cmd_wrap)
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
    parts.append(str(exchange.status))
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
    }


def _server(env: Environment, args: argparse.Namespace, host: str, anywhere: bool,
            as_json: bool, stream: TextIO | None) -> ProxyServer:
    """The proxy, reporting each request on ``stream`` (None: not at all, the workbench shows them)."""
    from workbench.proxy.recorder import Recorder  # the HTTP stack loads only for the commands that serve
    from workbench.proxy.server import ProxyServer, ProxySettings

    def report(exchange: Exchange) -> None:
        text = json.dumps(_record(exchange)) if as_json else _line(exchange)
        print(text, file=stream, flush=True)

    settings = ProxySettings(db_path=env.db_path, upstream=args.upstream, host=host, port=args.port,
                             listen_anywhere=anywhere, exact=args.exact)
    def warn(text: str) -> None:
        print(f"workbench proxy: {text}", file=sys.stderr, flush=True)

    recorder = Recorder(env.db_path, report=report if stream is not None else None,
                        warn=warn if stream is not None else None)
    return ProxyServer(settings, recorder)


def cmd_proxy(env: Environment, args: argparse.Namespace) -> int:
    if not (args.headless or args.json) and sys.stdout.isatty():
        return _view(env, args)
    server = _server(env, args, args.listen, args.listen_anywhere, args.json, sys.stdout)
    if not args.json:
        print(f"workbench proxy on {server.url} → {server.proxy.upstream}; storing in {env.db_path}", flush=True)
        print(f"point an agent at it: ANTHROPIC_BASE_URL={server.url} claude", flush=True)
    try:
        server.serve()
    finally:
        server.recorder.close()
    return EXIT_OK


def _view(env: Environment, args: argparse.Namespace) -> int:
    """The proxy in the background, the workbench in front: each agent's session as its requests arrive."""
    from workbench.commands.app import load_app, run

    load_app()
    from workbench.tui.launch import Launch

    server = _server(env, args, args.listen, args.listen_anywhere, False, None).start()
    try:
        return run(Launch.proxy(env.db_path, server.url, env.config))
    finally:
        server.stop()
        server.recorder.close()


def cmd_wrap(env: Environment, args: argparse.Namespace) -> int:
    agent = args.agent[1:] if args.agent[:1] == ["--"] else args.agent
    if not agent:
        raise WorkbenchError("wrap needs a command to run: workbench wrap -- claude -p '...'")
    server = _server(env, args, "127.0.0.1", False, args.json, sys.stderr).start()
    child_env = {**os.environ, "ANTHROPIC_BASE_URL": server.url}
    try:
        code = subprocess.run(agent, env=child_env, check=False).returncode
    except OSError as exc:
        code = EXIT_ERROR
        print(f"workbench: error: cannot run {agent[0]}: {exc.strerror or exc}", file=sys.stderr)
    finally:
        server.stop()
        server.recorder.close()
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
                  f"max_tokens {row.max_tokens}  {numbers}  HTTP {row.status}{flags}")
    return EXIT_OK
