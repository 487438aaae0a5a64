"""Month summaries: python -m invoicer.report FILE [--month YYYY-MM]."""

from __future__ import annotations

import argparse
from collections import defaultdict

from invoicer.csv_io import load_invoices
from invoicer.models import Invoice
from invoicer.totals import discount, format_cents, subtotal, tax, total


def summarise(invoices: list[Invoice]) -> dict[str, dict[str, int]]:
    months: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for inv in invoices:
        row = months[inv.month]
        row["invoices"] += 1
        row["subtotal"] += subtotal(inv)
        row["discount"] += discount(inv)
        row["tax"] += tax(inv)
        row["total"] += total(inv)
    return {month: dict(row) for month, row in sorted(months.items())}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="invoicer.report")
    parser.add_argument("file")
    parser.add_argument("--month")
    args = parser.parse_args(argv)
    for month, row in summarise(load_invoices(args.file)).items():
        if args.month and month != args.month:
            continue
        amounts = "  ".join(f"{k} {format_cents(row[k]):>10}" for k in ("subtotal", "discount", "tax", "total"))
        print(f"{month}  {row['invoices']:>3} invoices  {amounts}")


if __name__ == "__main__":
    main()
