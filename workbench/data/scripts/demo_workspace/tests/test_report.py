import unittest

from invoicer.models import Invoice, LineItem
from invoicer.report import summarise


class SummaryTests(unittest.TestCase):
    def test_groups_by_month(self):
        invoices = [
            Invoice("A", "X", "2024-01-05", [LineItem("a", 1, 1000)], 0, 20),
            Invoice("B", "Y", "2024-01-20", [LineItem("b", 2, 500)], 0, 20),
            Invoice("C", "Z", "2024-02-01", [LineItem("c", 1, 300)], 0, 0),
        ]
        summary = summarise(invoices)
        self.assertEqual(list(summary), ["2024-01", "2024-02"])
        self.assertEqual(summary["2024-01"]["invoices"], 2)
        self.assertEqual(summary["2024-01"]["total"], 2400)

    def test_empty(self):
        self.assertEqual(summarise([]), {})


if __name__ == "__main__":
    unittest.main()
