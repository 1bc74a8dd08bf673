#pragma once
// JSON text exactly as Python's json.dumps writes it (what run_squad.py and the official
// evaluation scripts print), so that files and outputs compare byte for byte.

#include <nlohmann/json.hpp>
#include <string>

namespace bertlab {

/// Python's repr(float): the shortest digits that round-trip, in fixed notation for decimal
/// exponents -4..15 ("0.0001", "86.2", "3.0") and scientific otherwise ("1e-05", "1.5e+16");
/// "NaN", "Infinity" and "-Infinity" as json.dumps writes them.
std::string python_float_repr(double value);

/// json.dumps(value, indent=indent) with Python's defaults (ensure_ascii, keys in order):
/// indent < 0 writes one line with ", " and ": " separators; indent >= 0 puts each member on
/// its own line, indented by `indent` spaces per level.
std::string python_json_dumps(const nlohmann::ordered_json& value, int indent = -1);

}  // namespace bertlab
