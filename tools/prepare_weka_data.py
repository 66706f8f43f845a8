#!/usr/bin/env python3
"""Real sparse data for the sparse models, from the example data sets Debian's weka package
ships in /usr/share/doc/weka/examples (ARFF files):

  soybean    UCI soybean (large): 683 plants, 35 categorical attributes, 19 diseases.
  reuters    Reuters-21578 "grain" (ModApte, as Weka's ReutersGrain-{train,test}.arff): 1,554
             training and 604 test news stories, each about grain or not.

usage: prepare_weka_data.py [OUT_DIR]   (default data/weka; tools/setup.sh installs weka)

Writes, for soybean, OUT_DIR/soybean/{train,test}.csv: the class index (in the order the
ARFF file declares the classes) in column 0, then each attribute's value as a category (a
missing value "?" as an empty field), no header; the rows shuffled by
random.Random(20261126), the last 20% for testing. Beside them {train,test}.onehot.libsvm: the
same rows one-hot encoded (one feature per attribute value, ids in declaration order) for
LIBLINEAR. For reuters, OUT_DIR/reuters/{train,test}.libsvm: labels +1/-1, and each story as
its words (lowercased runs of letters) numbered in order of first appearance, training stories
first, with the word counts scaled to unit length. Prints the sizes and class counts. Exits 2
naming the package when weka's examples are missing.
"""
import math
import os
import random
import re
import sys
from collections import Counter

EXAMPLES = "/usr/share/doc/weka/examples"
SEED = 20261126
TEST_FRACTION = 0.2


def split_values(line):
    """The comma-separated values of an ARFF data line or value list, unquoted."""
    values, current, quote, i = [], [], None, 0
    while i < len(line):
        c = line[i]
        if quote:
            if c == "\\" and i + 1 < len(line):
                nxt = line[i + 1]
                current.append({"n": "\n", "t": "\t"}.get(nxt, nxt))
                i += 2
                continue
            if c == quote:
                quote = None
            else:
                current.append(c)
        elif c in "'\"":
            quote = c
        elif c == ",":
            values.append("".join(current).strip())
            current = []
        else:
            current.append(c)
        i += 1
    values.append("".join(current).strip())
    return values


def read_arff(path):
    """(attributes, rows): attributes as (name, declared values or None), rows as value lists."""
    attributes, rows, in_data = [], [], False
    with open(path, encoding="latin-1") as file:
        for raw in file:
            line = raw.strip()
            if not line or line.startswith("%"):
                continue
            if in_data:
                rows.append(split_values(line))
            elif line.lower().startswith("@attribute"):
                match = re.match(r"@attribute\s+('[^']*'|\S+)\s+(.*)$", line, re.IGNORECASE)
                name, kind = match.group(1).strip("'"), match.group(2).strip()
                declared = split_values(kind[1:-1]) if kind.startswith("{") else None
                attributes.append((name, declared))
            elif line.lower().startswith("@data"):
                in_data = True
    for row in rows:
        if len(row) != len(attributes):
            sys.exit(f"prepare_weka_data: {path}: a row of {len(row)} values, not "
                     f"{len(attributes)}")
    return attributes, rows


def write(path, lines):
    with open(path, "w") as file:
        file.write("\n".join(lines) + "\n")


def categorical(name, out_dir):
    attributes, rows = read_arff(os.path.join(EXAMPLES, f"{name}.arff"))
    classes = attributes[-1][1]
    features = attributes[:-1]
    offsets, next_id = [], 1
    for _, declared in features:
        offsets.append(next_id)
        next_id += len(declared)
    random.Random(SEED).shuffle(rows)
    test_size = round(TEST_FRACTION * len(rows))
    os.makedirs(os.path.join(out_dir, name), exist_ok=True)
    for part, part_rows in (("train", rows[:-test_size]), ("test", rows[-test_size:])):
        csv, onehot = [], []
        for row in part_rows:
            label = classes.index(row[-1])
            values = ["" if v == "?" else v.replace(",", ";") for v in row[:-1]]
            csv.append(",".join([str(label)] + values))
            ids = [offsets[k] + features[k][1].index(v) for k, v in enumerate(row[:-1])
                   if v != "?"]
            onehot.append(" ".join([str(label)] + [f"{i}:1" for i in sorted(ids)]))
        write(os.path.join(out_dir, name, f"{part}.csv"), csv)
        write(os.path.join(out_dir, name, f"{part}.onehot.libsvm"), onehot)
        counts = Counter(int(line.split(",", 1)[0]) for line in csv)
        print(f"{name} {part}: {len(csv)} rows, {len(features)} attributes, "
              f"{len(counts)} of {len(classes)} classes")


def reuters(out_dir):
    parts = {}
    for part in ("train", "test"):
        _, rows = read_arff(os.path.join(EXAMPLES, f"ReutersGrain-{part}.arff"))
        parts[part] = [(re.findall(r"[a-z]+", text.lower()), label) for text, label in rows]
    vocabulary = {}
    for part in ("train", "test"):
        for words, _ in parts[part]:
            for word in words:
                vocabulary.setdefault(word, len(vocabulary) + 1)
    os.makedirs(os.path.join(out_dir, "reuters"), exist_ok=True)
    for part in ("train", "test"):
        lines = []
        for words, label in parts[part]:
            counts = Counter(vocabulary[w] for w in words)
            norm = math.sqrt(sum(c * c for c in counts.values())) or 1.0
            features = " ".join(f"{i}:{counts[i] / norm:.6g}" for i in sorted(counts))
            lines.append(("+1 " if label == "1" else "-1 ") + features)
        write(os.path.join(out_dir, "reuters", f"{part}.libsvm"), lines)
        positives = sum(1 for _, label in parts[part] if label == "1")
        print(f"reuters {part}: {len(lines)} stories, {positives} about grain, "
              f"{len(vocabulary)} words in all")


def main(out_dir):
    if not os.path.isdir(EXAMPLES):
        print(f"prepare_weka_data: {EXAMPLES} is missing: install Debian's weka "
              "(tools/setup.sh does)", file=sys.stderr)
        sys.exit(2)
    categorical("soybean", out_dir)
    reuters(out_dir)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "data/weka")
