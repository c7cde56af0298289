import unittest

import tally


class PackageTest(unittest.TestCase):
    def test_imports(self) -> None:
        self.assertIn("text statistics", tally.__doc__ or "")


if __name__ == "__main__":
    unittest.main()
