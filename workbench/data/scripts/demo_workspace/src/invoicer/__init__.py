"""Invoice totals in integer cents."""

from invoicer.models import Invoice, LineItem
from invoicer.totals import discount, format_cents, subtotal, tax, total

__all__ = ["Invoice", "LineItem", "discount", "format_cents", "subtotal", "tax", "total"]
