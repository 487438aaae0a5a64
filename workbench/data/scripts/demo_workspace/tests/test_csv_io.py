import tempfile
import unittest
from pathlib import Path

from invoicer.csv_io import load_invoices

CSV = """invoice,customer,issued,description,quantity,unit_cents,discount_pct,tax_pct
INV-7,Borealis,2024-02-03,Hosting,1,9900,0,21
INV-7,Borealis,2024-02-03,Support,2,4500,0,21
INV-8,Cobalt,2024-02-09,Licence,5,1200,5,21
"""


class LoadTests(unittest.TestCase):
    def setUp(self):
        folder = tempfile.TemporaryDirectory()
        self.addCleanup(folder.cleanup)
        self.path = Path(folder.name) / "export.csv"
        self.path.write_text(CSV, encoding="utf-8")

    def test_groups_rows_by_invoice(self):
        self.assertEqual([i.number for i in load_invoices(self.path)], ["INV-7", "INV-8"])

    def test_line_items_and_percentages(self):
        inv = load_invoices(self.path)[1]
        self.assertEqual((inv.items[0].quantity, inv.discount_pct, inv.tax_pct), (5, 5, 21))

    def test_month(self):
        self.assertEqual(load_invoices(self.path)[0].month, "2024-02")


if __name__ == "__main__":
    unittest.main()
