#!/usr/bin/env python3
"""Real data for the experiments: the UCI optical handwritten digits (1,797 8x8 images of 10
classes, pixel counts 0-16; Alpaydin and Kaynak 1998), as Debian's python3-sklearn ships them in
sklearn/datasets/data/digits.csv.gz (64 pixel columns, then the label), split into a training
and a test file the jobs name (data.csv, data.test_data; label_column 64).

usage: prepare_digits.py [OUT_DIR]   (default data/digits; tools/setup.sh installs the package)

The split is fixed: the rows shuffled by Python's random.Random(20261123), the first 1,437 for
training and the last 360 (20%) for testing, so that every run and every machine trains and
tests on the same images. Writes OUT_DIR/train.csv and OUT_DIR/test.csv (no header) and prints
the class counts of each. Exits 2 naming the package when the source file is missing.
"""
import gzip
import os
import random
import sys
from collections import Counter

SOURCE = "/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz"
TEST_ROWS = 360
SEED = 20261123


def main(out_dir):
    if not os.path.exists(SOURCE):
        print(f"prepare_digits: {SOURCE} is missing: install Debian's python3-sklearn "
              "(tools/setup.sh does)", file=sys.stderr)
        sys.exit(2)
    with gzip.open(SOURCE, "rt") as file:
        rows = [line.strip() for line in file if line.strip()]
    if len(rows) != 1797 or any(len(r.split(",")) != 65 for r in rows):
        sys.exit(f"prepare_digits: {SOURCE} is not the 1,797 rows of 65 columns expected")
    random.Random(SEED).shuffle(rows)
    os.makedirs(out_dir, exist_ok=True)
    for name, part in (("train", rows[:-TEST_ROWS]), ("test", rows[-TEST_ROWS:])):
        path = os.path.join(out_dir, f"{name}.csv")
        with open(path, "w") as file:
            file.write("\n".join(part) + "\n")
        counts = Counter(int(r.rsplit(",", 1)[1]) for r in part)
        print(f"{path}: {len(part)} images, per class "
              + " ".join(f"{c}:{counts[c]}" for c in range(10)))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "data/digits")
