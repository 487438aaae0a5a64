"""Every redaction pattern against a sample of the real shape of what it is for (made-up values of the
documented lengths and alphabets), and a check that no pattern is left without one."""

from __future__ import annotations

import pytest

from workbench.engine.transcript.redaction import PATTERNS, Redactor, redact

ALNUM = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def chars(n: int, alphabet: str = ALNUM) -> str:
    return (alphabet * (n // len(alphabet) + 1))[:n]


PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7v1Fake\nline2Fake==\n-----END RSA PRIVATE KEY-----"
SAMPLES: list[tuple[str, str]] = [
    ("private-key", PEM),
    ("private-key", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----"),
    ("anthropic-key", "sk-ant-api03-" + chars(93) + "AA"),
    ("anthropic-key", "sk-ant-admin01-" + chars(86)),
    ("api-key", "sk-proj-" + chars(156, ALNUM + "_-")),
    ("api-key", "sk-" + chars(48)),
    ("api-key", "sk-or-v1-" + chars(64, "0123456789abcdef")),
    ("stripe-key", "sk_live_51" + chars(97)),
    ("stripe-key", "sk_test_4eC39HqLyjWDarjtT1zdp7dc"),
    ("stripe-key", "rk_live_51" + chars(40)),
    ("stripe-webhook-secret", "whsec_" + chars(32)),
    ("google-api-key", "AIzaSy" + chars(33, ALNUM + "_-")),
    ("google-oauth-token", "ya29.a0AfH6SM" + chars(120, ALNUM + "_-")),
    ("github-token", "ghp_" + chars(36)),
    ("github-token", "gho_" + chars(36)),
    ("github-token", "github_pat_11ABCDEFG0" + chars(59, ALNUM + "_")),
    ("gitlab-token", "glpat-" + chars(20, ALNUM + "_-")),
    ("aws-key", "AKIAIOSFODNN7EXAMPLE"),
    ("aws-key", "ASIA" + chars(16, "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ")),
    ("slack-token", "xoxb-1234567890123-1234567890123-" + chars(24)),
    ("slack-token", "xapp-1-A0123456789-1234567890123-" + chars(64, "0123456789abcdef")),
    ("slack-webhook", "https://hooks.slack.com/services/T00000000/B00000000/" + chars(24)),
    ("huggingface-token", "hf_" + chars(34)),
    ("npm-token", "npm_" + chars(36)),
    ("pypi-token", "pypi-AgEIcHlwaS5vcmc" + chars(70, ALNUM + "_-")),
    ("sendgrid-key", "SG." + chars(22, ALNUM + "_-") + "." + chars(43, ALNUM + "_-")),
    ("twilio-key", "SK" + chars(32, "0123456789abcdef")),
    ("groq-key", "gsk_" + chars(52)),
    ("xai-key", "xai-" + chars(80)),
    ("digitalocean-token", "dop_v1_" + chars(64, "0123456789abcdef")),
    # the shapes round three of the security tests found passing (issue 44)
    ("aws-secret-key", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
    ("google-refresh-token", "1//0g" + chars(98, ALNUM + "_-")),
    ("google-client-secret", "GOCSPX-" + chars(28, ALNUM + "_-")),
    ("slack-token", "xoxe-1-My0xLTEyMzQ1Njc4OTAt" + chars(120, ALNUM)),
    ("slack-token", "xoxe.xoxp-1-Mi0yLTEyMzQ1Njc4OTAt" + chars(120, ALNUM)),
    ("private-key", ("-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBGFakeFakeBCADFake0123\n=Fake\n"
                     "-----END PGP PRIVATE KEY BLOCK-----")),
    ("private-key", "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\nBKcwggSjAgEAAoIBAQC7Fake0123"),
    ("putty-key", "PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nComment: eddsa-key-20260101\n"
                  "Public-Lines: 2\nAAAAC3NzaC1lZDI1NTE5AAAAIK\nFakeFakeFakeFake\nPrivate-Lines: 1\n"
                  "AAAAIFakePrivatePartXYZ0123456789abcdef\nPrivate-MAC: " + chars(64, "0123456789abcdef")),
    ("jwt", "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"),
]

WHOLE = {name for name, _ in SAMPLES}
"""Patterns that replace the whole match with ``[REDACTED:name]``."""

IN_CONTEXT: list[tuple[str, str, str]] = [
    ("url-password", "DATABASE_URL=postgres://app:Zq8pL2xV9wRt@db.internal:5432/app",
     "DATABASE_URL=postgres://app:[REDACTED]@db.internal:5432/app"),
    ("url-password", "git clone https://oauth2:tok3nValue99@gitlab.example.com/x.git",
     "git clone https://oauth2:[REDACTED]@gitlab.example.com/x.git"),
    ("bearer", "Authorization: Bearer abcdefghij0123456789", "Authorization: Bearer [REDACTED]"),
    ("bearer", "Authorization: Basic dXNlcjpwYXNzd29yZDEyMw==", "Authorization: Basic [REDACTED]"),
    ("assignment", "AZURE_STORAGE_ACCOUNT_KEY=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsu",
     "AZURE_STORAGE_ACCOUNT_KEY=[REDACTED]"),
    ("assignment", '"client_secret": "s3cr3tValue99"', '"client_secret": "[REDACTED]"'),
    ("assignment", r'{"patch": "api_key = \"s3cr3tValue99\"\n"}', r'{"patch": "api_key = \"[REDACTED]\"\n"}'),
    ("password", 'password = "correct horse battery staple"', 'password = "[REDACTED]"'),
    ("password", r'{"code": "DB_PASSWORD=\"two words\""}', r'{"code": "DB_PASSWORD=\"[REDACTED]\""}'),
]


@pytest.mark.parametrize(("kind", "secret"), SAMPLES, ids=[f"{k}-{i}" for i, (k, _) in enumerate(SAMPLES)])
def test_each_key_shape_is_redacted(kind: str, secret: str) -> None:
    for text in (secret, f"before {secret} after", f'{{"value": "{secret}"}}', f"KEY={secret}\n"):
        out = redact(text)
        assert f"[REDACTED:{kind}]" in out, out
        assert secret not in out and secret[-12:] not in out, f"part of the key is left: {out}"


@pytest.mark.parametrize(("kind", "text", "expected"), IN_CONTEXT)
def test_credentials_in_context_are_redacted(kind: str, text: str, expected: str) -> None:
    assert redact(text) == expected


@pytest.mark.parametrize(
    "text",
    ["max_output_tokens=12000", "sk_live_short", "AIza-not-long-enough", "https://example.com/user@host",
     "see https://docs.example.com:8080/a@b", "SKU12345", "ghp_short", "the token budget is fine",
     "postgres://localhost:5432/app", "commit 3f786850e387550fdab836ed7e6dc881de23001b",
     "id 123e4567-e89b-12d3-a456-426614174000", "path src/workbench/engine/transcript/store.py",
     'password = ""', "a base64 blob " + chars(400, ALNUM + "+/")],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert redact(text) == text


def test_every_pattern_has_a_sample() -> None:
    untested = {name for name, _, _ in PATTERNS} - WHOLE - {kind for kind, _, _ in IN_CONTEXT}
    assert untested == set(), f"redaction patterns without a real-shaped sample here: {untested}"


def test_a_known_credential_is_redacted_whatever_its_shape() -> None:
    key = "custom-proxy-credential-7Qx2Lw9Zp4Rk"
    redactor = Redactor.holding([key, None, "short"])
    assert redactor.known == (key,)
    assert redactor.text(f"env: KEY={key}\n") == "env: KEY=[REDACTED:credential]\n"
    assert redactor.value({"command": f"echo {key}", "n": 3}) == {"command": "echo [REDACTED:credential]", "n": 3}
