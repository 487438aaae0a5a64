import unittest

from invoicer.models import Invoice, LineItem
from invoicer.totals import discount, format_cents, percent_of, subtotal, tax, total


def invoice(discount_pct: int = 0, tax_pct: int = 0) -> Invoice:
    items = [LineItem("Widget", 3, 1250), LineItem("Setup", 1, 4000)]  # 77.50
    return Invoice("INV-1", "ACME", "2024-03-01", items, discount_pct, tax_pct)


class PercentTests(unittest.TestCase):
    def test_rounds_half_up(self):
        self.assertEqual(percent_of(250, 1), 3)  # 2.5 cents -> 3

    def test_zero_percent(self):
        self.assertEqual(percent_of(9999, 0), 0)


class TotalsTests(unittest.TestCase):
    def test_subtotal_sums_line_items(self):
        self.assertEqual(subtotal(invoice()), 7750)

    def test_discount_is_percent_of_subtotal(self):
        self.assertEqual(discount(invoice(discount_pct=10)), 775)

    def test_tax_without_discount(self):
        self.assertEqual(tax(invoice(tax_pct=20)), 1550)

    def test_tax_applies_after_discount(self):
        # 77.50 - 7.75 = 69.75; 20% of that is 13.95 (not 15.50)
        self.assertEqual(tax(invoice(discount_pct=10, tax_pct=20)), 1395)

    def test_total_without_discount(self):
        self.assertEqual(total(invoice(tax_pct=20)), 9300)

    def test_empty_invoice(self):
        self.assertEqual(total(Invoice("INV-0", "ACME", "2024-01-01")), 0)


class FormatTests(unittest.TestCase):
    def test_format_cents(self):
        self.assertEqual(format_cents(123456), "1,234.56")

    def test_format_negative(self):
        self.assertEqual(format_cents(-5), "-0.05")


if __name__ == "__main__":
    unittest.main()
