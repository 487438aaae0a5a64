"""Finding credentials in text: the shapes of the common providers' keys and tokens, ``Bearer`` headers,
``api_key=…`` / ``token: …`` style assignments (quotes escaped or not), quoted passwords, passwords in URLs,
PEM, PGP and PuTTY private keys (a PEM key cut before its END line too) and AWS's prefix-less secret key.

Used by exports and reports (a transcript made to be shared) and by the agent, which redacts a tool's
output and input, and the user's text, before any of them is stored or sent (:class:`Redactor`, which
also knows the workbench's own key by value). Redaction is textual and best effort: it is a guard
against a key travelling further than it must, not a guarantee.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from workbench.engine.transcript.models import Part

Replacement = str | Callable[[re.Match[str]], str]

_SECRET_NAME = (r"[A-Za-z0-9_.-]*(?:api[_-]?key|apikey|secret|token|passw(?:or)?d|access[_-]?key|account[_-]?key"
                r"|private[_-]?key|credential)[A-Za-z0-9_.-]*")


def _kind(name: str) -> str:
    return f"[REDACTED:{name}]"


PATTERNS: list[tuple[str, re.Pattern[str], Replacement]] = [
    # a PEM or PGP key to its END line, or (cut before it) to the end of its base64 lines
    ("private-key", re.compile(r"-----BEGIN ([A-Z0-9 ]*)PRIVATE KEY( BLOCK|)-----(?:.*?-----END \1PRIVATE KEY\2-----"
                               r"|[A-Za-z0-9+/=\s:,\-]*)", re.DOTALL), _kind("private-key")),
    ("putty-key", re.compile(r"PuTTY-User-Key-File-\d+:.*?(?:Private-(?:MAC|Hash):[ \t]*[0-9A-Fa-f]+|\Z)", re.DOTALL),
     _kind("putty-key")),
    ("anthropic-key", re.compile(r"\bsk-ant-[A-Za-z0-9_\-]{16,}"), _kind("anthropic-key")),
    ("api-key", re.compile(r"\bsk-(?:proj-|svcacct-|admin-|or-v1-)?[A-Za-z0-9_\-]{20,}"), _kind("api-key")),
    ("stripe-key", re.compile(r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}"), _kind("stripe-key")),
    ("stripe-webhook-secret", re.compile(r"\bwhsec_[A-Za-z0-9+/=]{24,}"), _kind("stripe-webhook-secret")),
    ("google-api-key", re.compile(r"\bAIza[0-9A-Za-z_\-]{35}(?![0-9A-Za-z_\-])"), _kind("google-api-key")),
    ("google-oauth-token", re.compile(r"\bya29\.[0-9A-Za-z_\-]{20,}"), _kind("google-oauth-token")),
    ("google-refresh-token", re.compile(r"(?<![\w/])1//0[0-9A-Za-z_\-]{30,}"), _kind("google-refresh-token")),
    ("google-client-secret", re.compile(r"\bGOCSPX-[0-9A-Za-z_\-]{20,}"), _kind("google-client-secret")),
    ("github-token", re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,}"), _kind("github-token")),
    ("github-token", re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}"), _kind("github-token")),
    ("gitlab-token", re.compile(r"\bglpat-[A-Za-z0-9_\-]{20,}"), _kind("gitlab-token")),
    ("aws-key", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), _kind("aws-key")),
    ("slack-token", re.compile(r"\bxox(?:[abposre]|e\.xox[bp])-[A-Za-z0-9-]{10,}"), _kind("slack-token")),
    ("slack-token", re.compile(r"\bxapp-\d-[A-Za-z0-9-]{20,}"), _kind("slack-token")),
    ("slack-webhook", re.compile(r"https://hooks\.slack\.com/services/T[A-Z0-9]+/B[A-Z0-9]+/[A-Za-z0-9]{16,}"),
     _kind("slack-webhook")),
    ("huggingface-token", re.compile(r"\bhf_[A-Za-z0-9]{30,}"), _kind("huggingface-token")),
    ("npm-token", re.compile(r"\bnpm_[A-Za-z0-9]{36}\b"), _kind("npm-token")),
    ("pypi-token", re.compile(r"\bpypi-AgE[A-Za-z0-9_\-]{50,}"), _kind("pypi-token")),
    ("sendgrid-key", re.compile(r"\bSG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{30,}"), _kind("sendgrid-key")),
    ("twilio-key", re.compile(r"\bSK[0-9a-f]{32}\b"), _kind("twilio-key")),
    ("groq-key", re.compile(r"\bgsk_[A-Za-z0-9]{40,}"), _kind("groq-key")),
    ("xai-key", re.compile(r"\bxai-[A-Za-z0-9]{40,}"), _kind("xai-key")),
    ("digitalocean-token", re.compile(r"\bdo[por]_v1_[a-f0-9]{64}\b"), _kind("digitalocean-token")),
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_\-]{10,}\.eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}"), _kind("jwt")),
    # AWS's secret access key has no prefix: 40 characters of base64 with upper and lower case and a digit,
    # standing alone (a git hash is lower-case hex; a longer base64 run is not cut into pieces)
    ("aws-secret-key", re.compile(r"(?<![A-Za-z0-9/+])(?=[A-Za-z0-9/+]{0,39}[A-Z])(?=[A-Za-z0-9/+]{0,39}[a-z])"
                                  r"(?=[A-Za-z0-9/+]{0,39}[0-9])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])"),
     _kind("aws-secret-key")),
    ("url-password", re.compile(r"\b([a-z][a-z0-9+.\-]*://[^\s:/@\[\]]+:)([^\s@/]{3,})(@)"),
     lambda m: f"{m.group(1)}[REDACTED]{m.group(3)}"),
    ("bearer", re.compile(r"\b(Bearer|Basic)\s+[A-Za-z0-9\-._~+/]{16,}=*"), lambda m: f"{m.group(1)} [REDACTED]"),
    (
        # a password in quotes, spaces and all: password = "correct horse battery staple"
        "password",
        re.compile(r"(?i)(\b[A-Za-z0-9_.-]*(?:passw(?:or)?d|passphrase)[A-Za-z0-9_.-]*\\?[\"']?\s*[:=]\s*)"
                   r"(\\?[\"'])((?:(?!\2).){4,200}?)\2"),
        lambda m: f"{m.group(1)}{m.group(2)}[REDACTED]{m.group(2)}",
    ),
    (
        # name = value / "name": "value" / name: value, where the value looks like a credential
        # (8+ characters with a letter and a digit), so counts like max_tokens=12000 stay; the quotes may be
        # escaped, as in a JSON string holding code (api_key = \"…\")
        "assignment",
        re.compile(
            rf"(?i)(\b{_SECRET_NAME}\\?[\"']?\s*[:=]\s*)(\\?[\"']|)"
            r"(?=[^\s\"'\\,;&]*[A-Za-z])(?=[^\s\"'\\,;&]*[0-9])([^\s\"'\\,;&]{8,})\2"
        ),
        lambda m: f"{m.group(1)}{m.group(2)}[REDACTED]{m.group(2)}",
    ),
]
"""(name, pattern, replacement), applied in order: the specific shapes before the generic ones."""

NEEDS: list[tuple[str, ...] | None] = [
    ("PRIVATE KEY",), ("PuTTY-User-Key-File-",), ("sk-ant-",), ("sk-",),
    ("sk_live_", "sk_test_", "rk_live_", "rk_test_"), ("whsec_",), ("AIza",), ("ya29.",), ("1//0",), ("GOCSPX-",),
    ("github_pat_",), ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), ("glpat-",), ("AKIA", "ASIA"), ("xox",), ("xapp-",),
    ("https://hooks.slack.com/services/",), ("hf_",), ("npm_",), ("pypi-AgE",), ("SG.",), ("SK",), ("gsk_",),
    ("xai-",), ("dop_v1_", "doo_v1_", "dor_v1_"), ("eyJ",), None, ("://",), ("Bearer", "Basic"), (), (),
]
"""Text each pattern of :data:`PATTERNS` cannot match without (one of these, as it is written): a scan for
them costs a fraction of a regular expression's, which holds the interpreter for its whole run (seconds on
a 30 MB tool result, while every other request through the proxy waited). ``None``: no text to look for (an
AWS secret key has no prefix); ``()``: a password or an assignment, looked for where :func:`_may_assign` says
one can be."""
SECRET_WORDS = ("key", "secret", "token", "passw", "passphrase", "credential")
"""What an ``assignment`` cannot match without, in lower case: each name :data:`_SECRET_NAME` allows holds one."""
_SECRET_KEY = re.compile(rf"(?i)^{_SECRET_NAME}$")
MIN_KNOWN_LENGTH = 8
"""A configured credential shorter than this is not looked for by value: it would match ordinary text."""


def _may_assign(text: str) -> bool:
    if "=" not in text and ":" not in text:
        return False
    lower = text.lower()
    return any(word in lower for word in SECRET_WORDS)


def redact(text: str) -> str:
    """``text`` with anything that looks like a credential replaced by ``[REDACTED…]``."""
    for (_, pattern, replacement), needs in zip(PATTERNS, NEEDS, strict=True):
        if needs is None or (any(literal in text for literal in needs) if needs else _may_assign(text)):
            text = pattern.sub(replacement, text)
    return text


def _looks_secret(key: str, value: str) -> bool:
    return bool(_SECRET_KEY.match(key)) and len(value) >= 8 and not value.isdigit() and not any(c.isspace() for c in value)


def redact_value(value: Any) -> Any:
    """Redact every string in a JSON-like value; a secret-named key loses its whole string value."""
    return Redactor().value(value)


@dataclass(frozen=True)
class Redactor:
    """:func:`redact`, plus the credentials the workbench itself holds (the provider's key), found by value
    wherever they appear, whatever their shape."""

    known: tuple[str, ...] = ()

    @classmethod
    def holding(cls, secrets: Iterable[str | None]) -> Redactor:
        return cls(tuple(sorted({s for s in secrets if s and len(s) >= MIN_KNOWN_LENGTH}, key=len, reverse=True)))

    def text(self, text: str) -> str:
        for secret in self.known:
            if secret in text:
                text = text.replace(secret, "[REDACTED:credential]")
        return redact(text)

    def value(self, value: Any) -> Any:
        """Every string in a JSON-like value redacted; a secret-named key loses its whole string value."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            return [self.value(v) for v in value]
        if isinstance(value, dict):
            out: dict[str, Any] = {}
            for key, item in value.items():
                if isinstance(item, str) and _looks_secret(str(key), item):
                    out[key] = "[REDACTED]"
                else:
                    out[key] = self.value(item)
            return out
        return value

    def parts(self, parts: list[Part]) -> list[Part]:
        """A message's text and tool input redacted; thinking is left as it is (it is signed: changing it
        would make the API refuse the next request). Unchanged parts are the same objects."""
        from workbench.engine.transcript.models import TextPart, ToolUsePart  # deferred: titles need no pydantic

        out: list[Part] = []
        for part in parts:
            if isinstance(part, TextPart):
                cleaned = self.text(part.text)
                part = part if cleaned == part.text else part.model_copy(update={"text": cleaned})
            elif isinstance(part, ToolUsePart):
                tool_input = self.value(part.input)
                part = part if tool_input == part.input else part.model_copy(update={"input": tool_input})
            out.append(part)
        return out
