"""Invoice arithmetic: subtotal, then discount, then tax. See docs/plan/01-vision.md."""

from __future__ import annotations

from invoicer.models import Invoice


def percent_of(cents: int, pct: int) -> int:
    """pct percent of cents, rounded half up to a whole cent."""
    return (cents * pct + 50) // 100


def subtotal(invoice: Invoice) -> int:
    return sum(item.amount_cents for item in invoice.items)


def discount(invoice: Invoice) -> int:
    base = subtotal(invoice)
    return percent_of(base, invoice.discount_pct)


def tax(invoice: Invoice) -> int:
    base = subtotal(invoice)
    return percent_of(base, invoice.tax_pct)


def total(invoice: Invoice) -> int:
    return subtotal(invoice) - discount(invoice) + tax(invoice)


def format_cents(cents: int) -> str:
    sign = "-" if cents < 0 else ""
    return f"{sign}{abs(cents) // 100:,}.{abs(cents) % 100:02d}"
