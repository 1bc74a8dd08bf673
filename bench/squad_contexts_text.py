#!/usr/bin/python3
"""Writes a pretraining text from the paragraphs of a SQuAD file, in the format of Google's
create_pretraining_data.py: one sentence per line, a blank line between documents (one document
per article). The README's larger create-data figure is measured on it:

    python3 bench/squad_contexts_text.py tests/data/squad/dev-v1.1.json.zip /tmp/squad-text.txt

Sentences are split after '.', '!' or '?' followed by a space and an upper-case letter, which is
good enough for a benchmark input.
"""

import json
import re
import sys
import zipfile


def read_squad(path):
    if path.endswith(".zip"):
        with zipfile.ZipFile(path) as z:
            name = next(n for n in z.namelist() if n.endswith(".json"))
            return json.loads(z.read(name).decode("utf-8"))
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: squad_contexts_text.py SQUAD.json[.zip] OUT.txt")
    data = read_squad(sys.argv[1])
    split = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")
    documents = []
    for article in data["data"]:
        lines = []
        for paragraph in article["paragraphs"]:
            lines.extend(s.strip() for s in split.split(paragraph["context"]) if s.strip())
        documents.append("\n".join(lines))
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        f.write("\n\n".join(documents) + "\n")


if __name__ == "__main__":
    main()
