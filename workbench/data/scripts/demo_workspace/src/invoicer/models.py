"""Invoices and their line items. All amounts are integer cents."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class LineItem:
    description: str
    quantity: int
    unit_cents: int

    @property
    def amount_cents(self) -> int:
        return self.quantity * self.unit_cents


@dataclass
class Invoice:
    number: str
    customer: str
    issued: str  # ISO date, "2024-03-15"
    items: list[LineItem] = field(default_factory=list)
    discount_pct: int = 0
    tax_pct: int = 0

    @property
    def month(self) -> str:
        return self.issued[:7]
