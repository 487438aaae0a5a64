"""Every key shape the redactor knows, planted wherever a request carries text, is in nothing the proxy
writes: not the database, its WAL, the proxy's lines, nor any export (``--no-redact`` included)."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import anthropic
from loopback_api import LoopbackAPI, Reply, text, tool_use
from proxy_support import SYSTEM, request

from workbench.cli import main
from workbench.commands.proxy import _line, _record
from workbench.engine.transcript.formats import EXPORT_FORMATS
from workbench.engine.transcript.redaction import PATTERNS
from workbench.engine.transcript.store import Store
from workbench.proxy.exchange import Exchange
from workbench.proxy.recorder import Recorder
from workbench.proxy.server import ProxyServer, ProxySettings

PLANTED: dict[str, tuple[str, str]] = {
    # shape: (text that carries it, the part of it that must appear nowhere)
    "private-key": ("-----BEGIN RSA PRIVATE KEY-----\nMIIEpPlantedKeyBody0123456789\n-----END RSA PRIVATE KEY-----",
                    "MIIEpPlantedKeyBody0123456789"),
    "anthropic-key": ("sk-ant-api03-Planted0123456789abcdefXYZ", "Planted0123456789abcdefXYZ"),
    "api-key": ("sk-proj-Planted0123456789abcdefOpenAI", "Planted0123456789abcdefOpenAI"),
    "stripe-key": ("sk_live_Planted0123456789Stripe", "Planted0123456789Stripe"),
    "stripe-webhook-secret": ("whsec_Planted0123456789abcdefWebhook", "Planted0123456789abcdefWebhook"),
    "google-api-key": ("AIzaPlanted0123456789abcdefghijklmnopqr", "Planted0123456789abcdefghijklmnopqr"),
    "google-oauth-token": ("ya29.Planted0123456789abcdefOAuth", "Planted0123456789abcdefOAuth"),
    "github-token": ("github_pat_Planted0123456789abcdefGitHub ghp_Planted0123456789abcdefghijklmnopq",
                     "Planted0123456789abcdefGitHub"),
    "gitlab-token": ("glpat-Planted0123456789GitLab", "Planted0123456789GitLab"),
    "aws-key": ("AKIAPLANTED012345678", "AKIAPLANTED012345678"),
    "slack-token": ("xoxb-Planted0123456789Slack xapp-1-Planted0123456789SlackApp", "Planted0123456789Slack"),
    "slack-webhook": ("https://hooks.slack.com/services/T0PLANT/B0PLANT/Planted0123456789Hook",
                      "Planted0123456789Hook"),
    "huggingface-token": ("hf_Planted0123456789abcdefghijklmnopHF", "Planted0123456789abcdefghijklmnopHF"),
    "npm-token": ("npm_Planted0123456789abcdefghijklmnopqrs", "Planted0123456789abcdefghijklmnopqrs"),
    "pypi-token": ("pypi-AgEPlanted0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMN",
                   "Planted0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMN"),
    "sendgrid-key": ("SG.Planted0123456789SG.Planted0123456789abcdefghijklmnopq", "Planted0123456789abcdefghijklmnopq"),
    "twilio-key": ("SK0123456789abcdef0123456789abcdef", "SK0123456789abcdef0123456789abcdef"),
    "groq-key": ("gsk_Planted0123456789abcdefghijklmnopqrstuvwxyz", "Planted0123456789abcdefghijklmnopqrstuvwxyz"),
    "xai-key": ("xai-Planted0123456789abcdefghijklmnopqrstuvwxyz", "xai-Planted0123456789abcdefghijklmnopqrstuvwxyz"),
    "digitalocean-token": ("dop_v1_" + "0123456789abcdef" * 4, "0123456789abcdef" * 4),
    "jwt": ("eyJPlanted012345.eyJPlanted678901.Planted0123456789sig", "Planted0123456789sig"),
    "url-password": ("postgres://admin:PlantedPassw0rd@db.example.com/app", "PlantedPassw0rd"),
    "bearer": ("Authorization: Bearer Planted0123456789BearerTok", "Planted0123456789BearerTok"),
    "assignment": ("DEPLOY_TOKEN=Planted0123456789Assign", "Planted0123456789Assign"),
    "putty-key": (("PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nComment: planted\nPublic-Lines: 1\n"
                  "AAAAPlantedPublic\nPrivate-Lines: 1\nAAAAPlantedPrivate0123\nPrivate-MAC: 0123abcd"),
                  "AAAAPlantedPrivate0123"),
    "google-refresh-token": ("token 1//0Planted0123456789abcdefghijklmnopq", "Planted0123456789abcdefghijklmnopq"),
    "google-client-secret": ("GOCSPX-Planted0123456789abcdefG", "Planted0123456789abcdefG"),
    "aws-secret-key": ("secret access key wJalrXUtnFEMI/K7MDENG/bPxRfiCYPLANTED0KE",
                       "wJalrXUtnFEMI/K7MDENG/bPxRfiCYPLANTED0KE"),
    "password": ('password = "Planted horse battery"', "Planted horse battery"),
}


def test_every_shape_the_redactor_knows_has_a_planted_key() -> None:
    assert sorted({name for name, _, _ in PATTERNS}) == sorted(PLANTED)


def planted_request(name: str, carried: str) -> dict[str, Any]:
    everything = "\n".join(text for text, _ in PLANTED.values())
    system = [*SYSTEM, {"type": "text", "text": f"Environment:\n{everything}"}]
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": f"{carried} is what I found ({name}); keep it safe"},
        {"role": "assistant", "content": [tool_use("toolu_1", "Bash", {"command": f"echo '{everything}'",
                                                                        "env": {"SECRET_KEY": carried}})]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": everything}]},
    ]
    return request(messages, system=system)


def cli(*args: str) -> str:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in args])
    assert code == 0, err.getvalue()
    return out.getvalue() + err.getvalue()


def test_no_planted_key_is_in_the_database_its_wal_the_lines_or_any_export(tmp_path: Path) -> None:
    db = tmp_path / "proxy.db"
    lines: list[str] = []
    wal = b""

    def report(exchange: Exchange) -> None:
        lines.extend([_line(exchange), json.dumps(_record(exchange))])

    with LoopbackAPI() as api:
        api.queue(*[Reply([text("Noted.")]) for _ in PLANTED])
        recorder = Recorder(db, home=tmp_path, report=report, warn=lines.append)
        server = ProxyServer(ProxySettings(db_path=db, upstream=api.url, port=0), recorder).start()
        try:
            client = anthropic.Anthropic(base_url=server.url, api_key="sk-test", max_retries=0)
            for name, (carried, _) in PLANTED.items():
                client.messages.create(**planted_request(name, carried))
            recorder.settle()
            wal = db.with_name(db.name + "-wal").read_bytes()
        finally:
            server.stop()
            recorder.close()
        forwarded = json.dumps(api.bodies)
    assert all(secret in forwarded for _, secret in PLANTED.values()), "forwarded as the client sent it"
    with Store(db) as store:
        sessions = [s.id for s, _ in store.list_sessions()]
    assert len(sessions) == len(PLANTED)
    exports = [cli("--db", str(db), "export", session, "--format", fmt, *flags)
               for session in sessions for fmt in EXPORT_FORMATS for flags in ((), ("--no-redact",))]
    exports.append(cli("--db", str(db), "sessions", "--json"))
    places: dict[str, bytes] = {"the WAL": wal, "the lines": "\n".join(lines).encode(),
                                "the exports": "\n".join(exports).encode()}
    places.update({str(path): path.read_bytes() for path in tmp_path.rglob("*") if path.is_file()})
    leaks = [(name, where) for name, (_, secret) in PLANTED.items() for where, data in places.items()
             if secret.encode() in data]
    assert not leaks
