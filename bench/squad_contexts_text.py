#!/usr/bin/python3
"""Writes a pretraining text from the paragraphs of SQuAD files, in the format of Google's
create_pretraining_data.py: one sentence per line, a blank line between documents. The README's
create-data figures are measured on such texts (bench/run.sh makes them):

    python3 bench/squad_contexts_text.py tests/data/squad/dev-v1.1.json.zip /tmp/squad-text.txt
    python3 bench/squad_contexts_text.py --per paragraph --times 5 \\
        tests/data/squad/dev-v1.1.json.zip tests/data/squad/dev-v2.0.json.zip /tmp/corpus.txt

--per article (the default) makes one document of each article, --per paragraph one of each
paragraph; --times N writes the whole text N times. Sentences are split after '.', '!' or '?'
followed by a space and an upper-case letter, which is good enough for a benchmark input.
"""

import argparse
import json
import re
import zipfile


def read_squad(path):
    if path.endswith(".zip"):
        with zipfile.ZipFile(path) as z:
            name = next(n for n in z.namelist() if n.endswith(".json"))
            return json.loads(z.read(name).decode("utf-8"))
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--per", choices=["article", "paragraph"], default="article",
                    help="what makes one document")
    ap.add_argument("--times", type=int, default=1, help="copies of the whole text")
    ap.add_argument("squad", nargs="+", help="SQuAD JSON files, plain or .json.zip")
    ap.add_argument("out", help="the text file to write")
    a = ap.parse_args()
    split = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")
    documents = []
    for path in a.squad:
        for article in read_squad(path)["data"]:
            lines = []
            for paragraph in article["paragraphs"]:
                sentences = [s.strip() for s in split.split(paragraph["context"]) if s.strip()]
                if a.per == "paragraph":
                    documents.append("\n".join(sentences))
                else:
                    lines.extend(sentences)
            if a.per == "article":
                documents.append("\n".join(lines))
    text = "\n\n".join(documents) + "\n"
    with open(a.out, "w", encoding="utf-8") as f:
        f.write("\n".join([text] * a.times))  # a blank line between the copies


if __name__ == "__main__":
    main()
