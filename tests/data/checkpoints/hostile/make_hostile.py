#!/usr/bin/env python3
"""Writes foreign_global.bin: a torch.save zip whose data.pkl would run a shell command.

The file is ../tiny-pytorch/pytorch_model.bin with archive/data.pkl replaced by a pickle of a
state dict whose one value unpickles by calling os.system (pickled as `posix system` on Linux).
Python's pickle.load - and so torch.load(weights_only=False) - would run the command, which
creates the marker file below; bertlab's reader must refuse the file at the GLOBAL opcode
instead, and torch_checkpoint_test checks that the marker never appears. Every other record
(archive/version, archive/data/0, ...) is kept as torch wrote it, all stored uncompressed.

Needs only the standard library: python3 make_hostile.py (run from any folder).
"""

import collections
import os
import pickle
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE = HERE.parent / "tiny-pytorch" / "pytorch_model.bin"
TARGET = HERE / "foreign_global.bin"
# Created only if something executes the pickle (torch_checkpoint_test checks it is absent).
MARKER = "/tmp/bertlab_hostile_checkpoint_executed"


class RunsShellCommand:
    def __reduce__(self):
        return (os.system, ("touch " + MARKER,))


def main():
    state = collections.OrderedDict(
        [("bert.embeddings.word_embeddings.weight", RunsShellCommand())])
    payload = pickle.dumps(state, protocol=2)
    with zipfile.ZipFile(SOURCE) as src, zipfile.ZipFile(TARGET, "w", zipfile.ZIP_STORED) as dst:
        for info in src.infolist():
            data = payload if info.filename == "archive/data.pkl" else src.read(info)
            dst.writestr(zipfile.ZipInfo(info.filename, date_time=info.date_time), data)
    print(f"wrote {TARGET} ({len(payload)}-byte data.pkl)")


if __name__ == "__main__":
    main()
