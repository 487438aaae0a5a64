"""export: a session as JSONL or Markdown, whole or as the model sees it."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from workbench.commands._common import EXIT_OK, FORMATS, AddCommand, Environment, resolve, warn_skipped
from workbench.engine.transcript.formats import EXPORT_FORMATS


def register(add: AddCommand) -> None:
    p = add("export", "write a session as JSONL or Markdown (secrets redacted)", cmd_export)
    p.add_argument("target", help="stored session id or transcript file")
    p.add_argument("--format", choices=EXPORT_FORMATS, default="markdown", help="output format (default: markdown)")
    p.add_argument("--projected", action="store_true",
                   help="only what the model sees now (the context view, placeholders included)")
    p.add_argument("--output", "-o", type=Path, help="write here instead of standard output")
    p.add_argument("--no-redact", dest="redact", action="store_false",
                   help="keep API keys and tokens as they are (they are redacted by default)")
    p.add_argument("--input-format", choices=FORMATS, help="transcript format of a file TARGET (default: detected)")


def cmd_export(env: Environment, args: argparse.Namespace) -> int:
    # Deferred: the context and the exporters pull in most of the engine; other commands start without them.
    from workbench.engine.context.session import SessionContext
    from workbench.engine.sources.export import export_chunks, write_export

    with env.store() as store:
        session_id, skipped = resolve(store, args.target, args.input_format)
        ctx = SessionContext.load(store, session_id, env.config)
    warn_skipped(skipped)
    if args.output is None:
        for chunk in export_chunks(ctx, args.format, projected=args.projected, redacted=args.redact):
            sys.stdout.write(chunk)
        return EXIT_OK
    written = write_export(ctx, args.format, args.output, projected=args.projected, redacted=args.redact)
    print(f"wrote {written}", file=sys.stderr)
    return EXIT_OK
