"""Read the billing export: one CSV row per line item."""

from __future__ import annotations

import csv
from pathlib import Path

from invoicer.models import Invoice, LineItem


def load_invoices(path: str | Path) -> list[Invoice]:
    invoices: dict[str, Invoice] = {}
    with open(path, newline="", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            invoice = invoices.get(row["invoice"])
            if invoice is None:
                invoice = invoices[row["invoice"]] = Invoice(
                    number=row["invoice"],
                    customer=row["customer"],
                    issued=row["issued"],
                    discount_pct=int(row["discount_pct"]),
                    tax_pct=int(row["tax_pct"]),
                )
            invoice.items.append(LineItem(row["description"], int(row["quantity"]), int(row["unit_cents"])))
    return list(invoices.values())
