#!/usr/bin/env python3
"""Writes differential_cases.txt (random inputs, one per line) and the expected outputs of
Google's tokenization.py on them, for tests/unit/tokenizer_test.cpp's differential test.

    python3 make_differential_cases.py [--oracle DIR] [--lines N] [--seed S]

DIR holds Google's code and its oracle driver (default /work/shared/reference/google-bert; see
its README). The inputs are drawn with a fixed seed, so a rerun writes the same files. Characters
are kept to those whose general category Python's unicodedata and the libutf8proc that bertlab
links agree on (they follow different Unicode versions; see README.md here).
"""
import argparse
import ctypes
import ctypes.util
import os
import random
import subprocess
import sys
import unicodedata
import zipfile
import json

HERE = os.path.dirname(os.path.abspath(__file__))
VOCAB = os.path.join(HERE, "..", "vocab", "bert-base-uncased", "vocab.txt")
SQUAD = os.path.join(HERE, "..", "squad", "dev-v2.0.json.zip")

# utf8proc_category_t values, in utf8proc.h's order, as Python's two-letter names.
UTF8PROC_CATEGORIES = ["Cn", "Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No",
                       "Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po", "Sm", "Sc", "Sk", "So", "Zs",
                       "Zl", "Zp", "Cc", "Cf", "Cs", "Co"]


def utf8proc_category():
    lib = ctypes.CDLL(ctypes.util.find_library("utf8proc") or "libutf8proc.so.2")
    lib.utf8proc_category.argtypes = [ctypes.c_int32]
    lib.utf8proc_category.restype = ctypes.c_int
    lib.utf8proc_tolower.argtypes = [ctypes.c_int32]
    lib.utf8proc_tolower.restype = ctypes.c_int32
    return lib


def agreed(lib, cp):
    """Whether both Unicode databases know `cp` alike (category, simple lower-case)."""
    if cp == 0x0A or 0xD800 <= cp <= 0xDFFF:
        return False  # a newline ends the case; surrogates are not text
    ch = chr(cp)
    cat = unicodedata.category(ch)
    if cat in ("Cn", "Co", "Cs"):
        return False
    if UTF8PROC_CATEGORIES[lib.utf8proc_category(cp)] != cat:
        return False
    lowered = ch.lower()
    return len(lowered) != 1 or ord(lowered) == lib.utf8proc_tolower(cp)


# Hand-picked pieces that Google's rules treat specially.
ACCENTED = "áéíóúàèìòùâêîôûäëïöüÿçñãõåæøœßÁÉÍÓÚÀÈÌÒÙÂÊÎÔÛÄËÏÖÜŸÇÑÃÕÅÆØŒĀăĄćČďĘěğİıŁńŘŞšŢťŮűŹžǅǈǋ"
COMBINING = "\u0300\u0301\u0302\u0303\u0308\u030a\u0327\u0345\u20dd"
GREEK = "ΑΒΓΔΕΖΗΘΙΚΛΜΝΞΟΠΡΣΤΥΦΧΨΩαβγδεζηθικλμνξοπρσςτυφχψωάέήίόύώΐΰ"
CYRILLIC = "АБВГДЕЁЖЗИЙКЛМНОПРСТУФХЦЧШЩЪЫЬЭЮЯабвгдеёжзийклмнопрстуфхцчшщъыьэюяіїєґ"
CJK = "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自着去之过家学对可她里后小么心多天而能好都然没日于起还发成事只作当想看文无开手十用主行方又如前所本见经头面公同三已老从动两长知民样现分将外但身些与高意进把法此实回二理美点月明其种声全工己话儿者向情部正名定女问力机给等几很业最间新什打便位因重被走电四第门相次东政海口使教西再平真听世气信北少关并内加化由却代军产入先山五太水万市眼体别处总才场师书比住员九笑性通目华报立马命张活难神数件安表原车白应路期叫死常提感金何更反合放做系计或司利受光王果亲界及今京务制解各任至清物台象记边共风战干接它许八特觉望直服毛林题建南度统色字请交爱让认算论百吃义科怎元社术结六功指思非流每青管夫连远资队跟带花快条院变联言权往展该领传近留红治决周保达办运武半候七必城父强步完革深区即求品士转量空甚众技轻程告江语英基派满式李息写呢识极令黄德收脸钱党倒未持取设始版双历越史商千片容研像找友孩站广改议形委早房音火际则首单据导影失拿网香似斯专石若兵弟谁校读志飞观争究包组造落视济喜离虽坏兴切店"
CJK_ASTRAL = "\U00020000\U00020001\U0002A700\U0002B740\U0002B820\U0002F800"
KANA_HANGUL = "あいうえおかきくけこさしすせそアイウエオカキクケコーひらがなカタカナ한국어조선말안녕하세요"
OTHER_SCRIPTS = ("مرحبابالعالم" "שלוםעולם" "नमस्तेदुनिया" "สวัสดีชาวโลก" "გამარჯობა" "Բարեւ"
                 "ሰላም" "ᠮᠣᠩᠭᠣᠯ")
PUNCT_ASCII = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"
PUNCT_UNICODE = "¡¿«»‘’‚“”„†‡•…‰′″‹›※‼⁇⁈⁉、。〃〈〉《》「」『』【】〔〕〜・！？（），．：；｛｝–—―¶§·"
SYMBOLS = "©®™°±×÷€£¥¢₹₽∑∞≈≠≤≥→←↑↓♠♣♥♦★☆✓✗"
EMOJI = "😀😃😄😁😆😅🤣😂🙂🙃😉😊😇🥰😍🤩😘👍👎👏🙏💪🔥✨🎉❤️🇺🇸🇯🇵👨‍👩‍👧"
CONTROL = "\x00\x01\x02\x07\x08\x0b\x0c\x1b\x1c\x1d\x1e\x1f\x7f\x80\x85\x9f\u00ad\u200b\u200c\u200d\u200e\u2060\ufeff\ufffd"
SPACES = " \t\r\u00a0\u1680\u2000\u2003\u2007\u2009\u200a\u202f\u205f\u3000\u2028\u2029"
SPECIAL = ["ǅ", "ΐ", "İ", "ﬁ", "ﬀ", "K", "Å", "Ω", "½", "²", "①", "Ⅻ", "ℌ", "ℍ", "ǲ", "ẞ", "ß",
           "ΣΑΣ", "ΌΣΟΣ", "Σ", "ΑΣ.", "ΑΣ'Σ", "Ὄ", "ﬃ", "㎏", "㍿"]


def random_word(rng, pool, lo=1, hi=12):
    return "".join(rng.choice(pool) for _ in range(rng.randint(lo, hi)))


def squad_lines():
    with zipfile.ZipFile(SQUAD) as z:
        name = next(n for n in z.namelist() if n.endswith(".json"))
        data = json.loads(z.read(name))
    lines = []
    for article in data["data"]:
        for p in article["paragraphs"]:
            lines.append(p["context"])
            lines.extend(q["question"] for q in p["qas"])
    return [l for l in lines if "\n" not in l]


def make_cases(rng, lines, assigned):
    vocab = [l.strip() for l in open(VOCAB, encoding="utf-8")]
    pieces = [t for t in vocab if t and not t.startswith("[")]
    ascii_letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    generators = [
        # Real text: SQuAD contexts and questions.
        lambda: rng.choice(lines),
        # Vocabulary pieces glued together (known words, sub-words, ## in the middle).
        lambda: " ".join("".join(rng.choice(pieces) for _ in range(rng.randint(1, 4)))
                         for _ in range(rng.randint(1, 8))),
        # Unknown words: random letters, sometimes upper case.
        lambda: " ".join(random_word(rng, ascii_letters, 3, 20) for _ in range(rng.randint(1, 6))),
        # Long words, around Google's 200-character limit and past 100.
        lambda: random_word(rng, "abcdefghij", 1, 1) * rng.choice([99, 100, 101, 150, 199, 200,
                                                                     201, 250]),
        lambda: random_word(rng, ascii_letters + ACCENTED, 101, 260),
        lambda: "".join(rng.choice(pieces) for _ in range(rng.randint(20, 60))),
        # Mixed scripts with punctuation, controls and spaces between.
        lambda: "".join(
            rng.choice([
                lambda: random_word(rng, ascii_letters),
                lambda: random_word(rng, ACCENTED + ascii_letters),
                lambda: random_word(rng, "aeiouAEIOU") + rng.choice(COMBINING),
                lambda: random_word(rng, GREEK),
                lambda: random_word(rng, CYRILLIC),
                lambda: random_word(rng, CJK, 1, 6),
                lambda: rng.choice(CJK_ASTRAL),
                lambda: random_word(rng, KANA_HANGUL, 1, 6),
                lambda: random_word(rng, OTHER_SCRIPTS, 2, 8),
                lambda: rng.choice(PUNCT_ASCII),
                lambda: rng.choice(PUNCT_UNICODE),
                lambda: rng.choice(SYMBOLS),
                lambda: rng.choice(EMOJI),
                lambda: rng.choice(CONTROL),
                lambda: rng.choice(SPECIAL),
                lambda: rng.choice(pieces),
            ])() + rng.choice(["", "", " ", " ", rng.choice(SPACES), rng.choice(PUNCT_ASCII)])
            for _ in range(rng.randint(1, 25))),
        # Any character both Unicode databases agree on, words of them.
        lambda: " ".join("".join(chr(rng.choice(assigned)) for _ in range(rng.randint(1, 8)))
                         for _ in range(rng.randint(1, 6))),
        # A SQuAD line with some characters swapped for special ones.
        lambda: "".join(
            (rng.choice(CONTROL + SPACES + PUNCT_UNICODE + COMBINING + ACCENTED)
             if rng.random() < 0.05 else c) for c in rng.choice(lines)[:300]),
    ]
    return [rng.choice(generators)() for _ in range(args.lines)]


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--oracle", default="/work/shared/reference/google-bert")
    ap.add_argument("--lines", type=int, default=1500)
    ap.add_argument("--seed", type=int, default=20261204)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    lib = utf8proc_category()
    assigned = [cp for cp in range(0x20, 0x30000) if agreed(lib, cp)]
    cases = make_cases(rng, squad_lines(), assigned)
    assert not any("\n" in case for case in cases)
    text = "".join(c + "\n" for c in cases)
    # Drop any character the two databases disagree on (the hand-picked pools included).
    text = "".join(c for c in text if c in "\t\r\n" or ord(c) < 0x20 or agreed(lib, ord(c)))
    base = os.path.join(HERE, "differential_cases")
    with open(base + ".txt", "w", encoding="utf-8", newline="") as f:
        f.write(text)
    driver = os.path.join(args.oracle, "oracle_tokenize.py")
    for name, flags in [("uncased.tokens", []), ("uncased.ids", ["--ids"]),
                        ("cased.tokens", ["--no-lower-case"]),
                        ("cased.ids", ["--no-lower-case", "--ids"])]:
        out = subprocess.run([sys.executable, driver, "--vocab", VOCAB] + flags,
                             input=text.encode("utf-8"), stdout=subprocess.PIPE, check=True)
        with open(f"{base}.{name}", "wb") as f:
            f.write(out.stdout)
    print(f"wrote {len(cases)} cases to {base}.txt and their four expected files", file=sys.stderr)
