#!/usr/bin/env python3
"""Generates runtime/text/UnicodeTables.inc from the Unicode Character Database
that Debian's `unicode-data` package installs in /usr/share/unicode.

The tokenizer needs four things, and nothing else, from Unicode:
  * the class of each code point for the Qwen2 pre-tokenizer split:
    letter (\\p{L}: Lu Ll Lt Lm Lo), number (\\p{N}: Nd Nl No), white space
    (the White_Space property, which is Oniguruma's \\s), or other;
  * for NFC: the canonical combining class, the NFC_Quick_Check value, the full
    canonical decomposition of every code point that has one (Hangul syllables
    are algorithmic and not listed), and the primary composites (canonical
    pairs that are not excluded from composition);
  * the code points whose simple case folding is one of the letters of the
    contractions ('s 't 're 've 'm 'll 'd), which the pre-tokenizer matches
    case-insensitively.

Usage: gen_unicode_tables.py [UCD_DIR] > runtime/text/UnicodeTables.inc
The output is deterministic; tests/text/CMakeLists.txt regenerates it and
fails if the committed file differs.
"""
import os
import sys

MAX_CP = 0x110000
CLASS_OTHER, CLASS_LETTER, CLASS_NUMBER, CLASS_SPACE = 0, 1, 2, 3
QC_YES, QC_MAYBE, QC_NO = 0, 1, 2
HANGUL_FIRST, HANGUL_LAST = 0xAC00, 0xD7A3


def ranges(field):
    if ".." in field:
        lo, hi = field.split("..")
        return range(int(lo, 16), int(hi, 16) + 1)
    return range(int(field, 16), int(field, 16) + 1)


def data_lines(path):
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                yield [x.strip() for x in line.split(";")]


def read_unicode_data(ucd):
    """Returns category, combining class and decomposition per code point."""
    category = {}
    ccc = {}
    decomposition = {}
    range_start = None
    with open(os.path.join(ucd, "UnicodeData.txt"), encoding="utf-8") as f:
        for line in f:
            fields = line.rstrip("\n").split(";")
            cp = int(fields[0], 16)
            name, cat, comb, decomp = fields[1], fields[2], int(fields[3]), fields[5]
            if name.endswith(", First>"):
                range_start = cp
                continue
            first = range_start if name.endswith(", Last>") else cp
            range_start = None
            for c in range(first, cp + 1):
                category[c] = cat
                if comb:
                    ccc[c] = comb
            if decomp and not decomp.startswith("<"):
                decomposition[cp] = [int(x, 16) for x in decomp.split()]
    return category, ccc, decomposition


def char_class(cat, white_space):
    if white_space:
        return CLASS_SPACE
    if cat[0] == "L":
        return CLASS_LETTER
    if cat[0] == "N":
        return CLASS_NUMBER
    return CLASS_OTHER


def full_decomposition(cp, decomposition):
    if cp not in decomposition:
        return [cp]
    out = []
    for c in decomposition[cp]:
        out.extend(full_decomposition(c, decomposition))
    return out


def two_stage(values, block_size):
    """Splits `values` (one per code point) into a block index per block and
    the distinct blocks."""
    blocks = []
    index = {}
    stage1 = []
    for start in range(0, len(values), block_size):
        block = tuple(values[start:start + block_size])
        if block not in index:
            index[block] = len(blocks)
            blocks.append(block)
        stage1.append(index[block])
    return stage1, blocks


def emit_array(out, ctype, name, values, per_line=16, fmt="{}"):
    out.append(f"constexpr {ctype} {name}[{len(values)}] = {{")
    for i in range(0, len(values), per_line):
        out.append("    " + ", ".join(fmt.format(v) for v in values[i:i + per_line]) + ",")
    out.append("};")


def main():
    ucd = sys.argv[1] if len(sys.argv) > 1 else "/usr/share/unicode"
    category, ccc, decomposition = read_unicode_data(ucd)
    white_space = set()
    for fields in data_lines(os.path.join(ucd, "PropList.txt")):
        if fields[1] == "White_Space":
            white_space.update(ranges(fields[0]))
    nfc_qc = {}
    full_exclusion = set()
    for fields in data_lines(os.path.join(ucd, "DerivedNormalizationProps.txt")):
        if fields[1] == "NFC_QC":
            value = QC_MAYBE if fields[2] == "M" else QC_NO
            for c in ranges(fields[0]):
                nfc_qc[c] = value
        elif fields[1] == "Full_Composition_Exclusion":
            full_exclusion.update(ranges(fields[0]))
    folds_to = []
    for fields in data_lines(os.path.join(ucd, "CaseFolding.txt")):
        if fields[1] in ("C", "S"):
            target = int(fields[2], 16)
            if chr(target) in "strevmld":
                folds_to.append((int(fields[0], 16), target))
    folds_to.sort()

    classes = [char_class(category.get(c, "Cn"), c in white_space) for c in range(MAX_CP)]
    # 2 bits per code point, 4 per byte, blocks of 256 code points (64 bytes).
    packed = []
    for start in range(0, MAX_CP, 4):
        packed.append(sum(classes[start + i] << (2 * i) for i in range(4)))
    class_stage1, class_blocks = two_stage(packed, 64)

    # ccc in bits 0-7, NFC_QC in bits 8-9; blocks of 128 code points.
    norm = [ccc.get(c, 0) | (nfc_qc.get(c, QC_YES) << 8) for c in range(MAX_CP)]
    norm_stage1, norm_blocks = two_stage(norm, 128)

    decomp_keys, decomp_offsets, decomp_data = [], [], []
    for cp in sorted(decomposition):
        full = full_decomposition(cp, decomposition)
        decomp_keys.append(cp)
        decomp_offsets.append(len(decomp_data))
        decomp_data.extend(full)
    decomp_offsets.append(len(decomp_data))

    compositions = []
    for cp, parts in decomposition.items():
        if len(parts) == 2 and cp not in full_exclusion:
            compositions.append(((parts[0] << 21) | parts[1], cp))
    compositions.sort()

    out = [
        "// Generated by scripts/gen_unicode_tables.py from the Unicode Character",
        "// Database in Debian's unicode-data package. Do not edit.",
        "// clang-format off",
        "",
        f"constexpr uint32_t kCharClassBlockShift = 8; // 256 code points per block, 2 bits each",
    ]
    emit_array(out, "uint16_t", "kCharClassStage1", class_stage1)
    flat = [b for block in class_blocks for b in block]
    emit_array(out, "uint8_t", "kCharClassStage2", flat, 16, "0x{:02x}")
    out.append("constexpr uint32_t kNormBlockShift = 7; // 128 code points per block")
    emit_array(out, "uint16_t", "kNormStage1", norm_stage1)
    flat = [v for block in norm_blocks for v in block]
    emit_array(out, "uint16_t", "kNormStage2", flat, 16, "0x{:03x}")
    emit_array(out, "uint32_t", "kDecompositionKeys", decomp_keys, 12, "0x{:05x}")
    emit_array(out, "uint16_t", "kDecompositionOffsets", decomp_offsets, 16)
    emit_array(out, "char32_t", "kDecompositionData", decomp_data, 12, "0x{:05x}")
    emit_array(out, "uint64_t", "kCompositionKeys", [k for k, _ in compositions], 6, "0x{:011x}ull")
    emit_array(out, "uint32_t", "kCompositionValues", [v for _, v in compositions], 12, "0x{:05x}")
    emit_array(out, "uint32_t", "kCaseFoldSources", [s for s, _ in folds_to], 12, "0x{:05x}")
    emit_array(out, "uint8_t", "kCaseFoldTargets", [t for _, t in folds_to], 12, "'{:c}'")
    out.append("// clang-format on")
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
