// Answers from logits, as run_squad.py's write_predictions, get_final_text, _get_best_indexes
// and _compute_softmax.

#include "squad_predict.h"

#include <bertlab/error.h>
#include <bertlab/io/atomic_file.h>
#include <bertlab/text/tokenizer.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <unordered_map>

#include <bertlab/io/python_json.h>
#include <bertlab/text/python_text.h>

namespace bertlab::squad {

namespace {

std::u32string to_u32(std::string_view text) {
  std::u32string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) out.push_back(next_code_point(text, i));
  return out;
}

std::string to_utf8(std::u32string_view text) {
  std::string out;
  for (const char32_t c : text) {
    if (c < 0x80) {
      out += static_cast<char>(c);
    } else if (c < 0x800) {
      out += static_cast<char>(0xC0 | (c >> 6));
      out += static_cast<char>(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
      out += static_cast<char>(0xE0 | (c >> 12));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (c & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (c >> 18));
      out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (c & 0x3F));
    }
  }
  return out;
}

// _strip_spaces: the text without " " and, per kept character, its index in the text.
std::pair<std::u32string, std::vector<size_t>> strip_spaces(const std::u32string& text) {
  std::u32string kept;
  std::vector<size_t> kept_to_text;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == U' ') continue;
    kept_to_text.push_back(i);
    kept.push_back(text[i]);
  }
  return {kept, kept_to_text};
}

// _get_best_indexes: the positions of the n largest logits, ties in position order (Python's
// sorted is stable); none for n_best_size <= 0, as Google's loop breaks at once.
std::vector<size_t> best_indexes(const std::vector<float>& logits, int64_t n_best_size) {
  std::vector<size_t> order(logits.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return logits[a] > logits[b]; });
  const size_t keep = n_best_size > 0 ? static_cast<size_t>(n_best_size) : 0;
  order.resize(std::min(order.size(), keep));
  return order;
}

// _compute_softmax, in double as Python's floats.
std::vector<double> softmax(const std::vector<double>& scores) {
  if (scores.empty()) return {};
  const double max_score = *std::max_element(scores.begin(), scores.end());
  std::vector<double> exps;
  double total = 0.0;
  for (const double s : scores) {
    exps.push_back(std::exp(s - max_score));
    total += exps.back();
  }
  for (double& e : exps) e /= total;
  return exps;
}

struct Prelim {
  size_t feature = 0;  // [feature of the example]
  size_t start = 0;    // [token position]
  size_t end = 0;      // [token position]
  double start_logit = 0.0;
  double end_logit = 0.0;
};

// Google's detokenization of the predicted pieces: "##" joins, whitespace collapsed.
std::string detokenize(const std::vector<std::string>& tokens, size_t start, size_t end) {
  std::string text;
  for (size_t i = start; i <= end; ++i) {
    if (i > start) text += ' ';
    text += tokens[i];
  }
  for (const std::string from : {" ##", "##"}) {
    std::string replaced;
    size_t pos = 0;
    for (size_t hit; (hit = text.find(from, pos)) != std::string::npos; pos = hit + from.size()) {
      replaced.append(text, pos, hit - pos);
    }
    replaced.append(text, pos, std::string::npos);
    text = std::move(replaced);
  }
  return join_python_split(text);
}

}  // namespace

std::string get_final_text(const std::string& pred_text, const std::string& orig_text,
                           bool do_lower_case) {
  const BasicTokenizer tokenizer(do_lower_case);
  std::string tok_joined;
  for (const auto& token : tokenizer.tokenize(orig_text)) {
    if (!tok_joined.empty()) tok_joined += ' ';
    tok_joined += token;
  }
  // Python indexes code points; so do we from here on.
  const std::u32string tok_text = to_u32(tok_joined);
  const std::u32string orig = to_u32(orig_text);
  const std::u32string pred = to_u32(pred_text);
  const size_t start = tok_text.find(pred);
  if (start == std::u32string::npos) return orig_text;
  const size_t end = start + pred.size() - 1;

  // Named members, not a structured binding: C++17 lambdas cannot capture those.
  const auto orig_split = strip_spaces(orig);
  const std::u32string& orig_ns = orig_split.first;
  const std::vector<size_t>& orig_ns_to_s = orig_split.second;
  const auto [tok_ns, tok_ns_to_s] = strip_spaces(tok_text);
  // The alignment holds only if both sides have the same characters once spaces go.
  if (orig_ns.size() != tok_ns.size()) return orig_text;
  std::unordered_map<size_t, size_t> tok_s_to_ns;
  for (size_t i = 0; i < tok_ns_to_s.size(); ++i) tok_s_to_ns[tok_ns_to_s[i]] = i;
  const auto project = [&](size_t tok_position) -> std::optional<size_t> {
    const auto it = tok_s_to_ns.find(tok_position);
    if (it == tok_s_to_ns.end() || it->second >= orig_ns_to_s.size()) return std::nullopt;
    return orig_ns_to_s[it->second];
  };
  const auto orig_start = project(start);
  const auto orig_end = project(end);
  if (!orig_start || !orig_end) return orig_text;
  if (*orig_end < *orig_start) return "";  // Python's empty slice
  return to_utf8(std::u32string_view(orig).substr(*orig_start, *orig_end - *orig_start + 1));
}

SquadPredictions make_predictions(const std::vector<SquadExample>& examples,
                                  const std::vector<SquadFeature>& features,
                                  const std::vector<RawResult>& results,
                                  const PredictionOptions& options) {
  std::vector<std::vector<const SquadFeature*>> features_of(examples.size());
  for (const auto& f : features) {
    BERTLAB_CHECK(f.example_index >= 0 && static_cast<size_t>(f.example_index) < examples.size(),
                  "squad: feature {} belongs to example {}, but there are {} examples", f.unique_id,
                  f.example_index, examples.size());
    features_of[static_cast<size_t>(f.example_index)].push_back(&f);
  }
  std::unordered_map<int64_t, const RawResult*> result_of;
  for (const auto& r : results) result_of[r.unique_id] = &r;

  SquadPredictions out;
  for (size_t e = 0; e < examples.size(); ++e) {
    const SquadExample& example = examples[e];
    const auto& feats = features_of[e];
    std::vector<Prelim> prelims;
    // The smallest null score (start and end at [CLS]) over the example's windows.
    double score_null = 1000000.0;
    size_t null_feature = 0;
    double null_start = 0.0;
    double null_end = 0.0;
    for (size_t fi = 0; fi < feats.size(); ++fi) {
      const SquadFeature& f = *feats[fi];
      const auto it = result_of.find(f.unique_id);
      BERTLAB_CHECK(it != result_of.end(),
                    "squad: no logits for feature unique_id {} (question {}); every feature "
                    "needs a result",
                    f.unique_id, example.qas_id);
      const RawResult& r = *it->second;
      BERTLAB_CHECK(!r.start_logits.empty() && r.start_logits.size() >= f.tokens.size() &&
                        r.end_logits.size() == r.start_logits.size(),
                    "squad: feature unique_id {} has {} tokens but {} start and {} end logits; "
                    "the results need one start and one end logit per position "
                    "(max_seq_length of each)",
                    f.unique_id, f.tokens.size(), r.start_logits.size(), r.end_logits.size());
      if (options.version_2_with_negative) {
        const double null_score =
            static_cast<double>(r.start_logits[0]) + static_cast<double>(r.end_logits[0]);
        if (null_score < score_null) {
          score_null = null_score;
          null_feature = fi;
          null_start = r.start_logits[0];
          null_end = r.end_logits[0];
        }
      }
      const size_t n_tokens = f.tokens.size();
      for (const size_t s : best_indexes(r.start_logits, options.n_best_size)) {
        for (const size_t en : best_indexes(r.end_logits, options.n_best_size)) {
          // Spans in the question, past the tokens, in a window that is not the token's
          // max-context one, backwards or too long cannot be answers.
          if (s >= n_tokens || en >= n_tokens) continue;
          if (f.token_to_orig[s] < 0 || f.token_to_orig[en] < 0) continue;
          if (f.token_is_max_context[s] == 0) continue;
          if (en < s) continue;
          if (static_cast<int64_t>(en - s + 1) > options.max_answer_length) continue;
          prelims.push_back({fi, s, en, r.start_logits[s], r.end_logits[en]});
        }
      }
    }
    if (options.version_2_with_negative) {
      prelims.push_back({null_feature, 0, 0, null_start, null_end});
    }
    std::stable_sort(prelims.begin(), prelims.end(), [](const Prelim& a, const Prelim& b) {
      return a.start_logit + a.end_logit > b.start_logit + b.end_logit;
    });

    std::vector<NbestEntry> nbest;
    std::set<std::string> seen;
    for (const Prelim& p : prelims) {
      if (static_cast<int64_t>(nbest.size()) >= options.n_best_size) break;
      std::string text;
      if (p.start > 0) {
        const SquadFeature& f = *feats[p.feature];
        const std::string tok_text = detokenize(f.tokens, p.start, p.end);
        std::string orig_text;
        for (int32_t w = f.token_to_orig[p.start]; w <= f.token_to_orig[p.end]; ++w) {
          if (w > f.token_to_orig[p.start]) orig_text += ' ';
          orig_text += (*example.doc_tokens)[static_cast<size_t>(w)];
        }
        text = get_final_text(tok_text, orig_text, options.do_lower_case);
        if (!seen.insert(text).second) continue;
      } else {
        seen.insert("");
      }
      nbest.push_back({text, 0.0, p.start_logit, p.end_logit});
    }
    if (options.version_2_with_negative && seen.count("") == 0) {
      nbest.push_back({"", 0.0, null_start, null_end});
    }
    // Google's nonce for the rare example without any valid span.
    if (nbest.empty()) nbest.push_back({"empty", 0.0, 0.0, 0.0});

    std::vector<double> totals;
    const NbestEntry* best_non_null = nullptr;
    for (const auto& entry : nbest) {
      totals.push_back(entry.start_logit + entry.end_logit);
      if (best_non_null == nullptr && !entry.text.empty()) best_non_null = &entry;
    }
    const auto probs = softmax(totals);
    for (size_t i = 0; i < nbest.size(); ++i) nbest[i].probability = probs[i];

    if (!options.version_2_with_negative) {
      out.answers.emplace_back(example.qas_id, nbest.front().text);
    } else if (best_non_null == nullptr) {
      // The n-best holds only the null answer, and Google fails (None has no start_logit). That
      // happens only where no candidate span is valid (every top start/end pair lies in the
      // question, is backwards or too long, or n_best_size <= 0): a span's text is never empty,
      // and a valid span always outranks the null answer of its own window, so it would be in
      // the n-best. We answer "" and give the null score's odds against a missing span scored 0
      // (as Google's "empty" nonce is): score_null − 0.
      out.null_odds.emplace_back(example.qas_id, score_null);
      out.answers.emplace_back(example.qas_id, "");
    } else {
      const double diff = score_null - best_non_null->start_logit - best_non_null->end_logit;
      out.null_odds.emplace_back(example.qas_id, diff);
      out.answers.emplace_back(example.qas_id, diff > options.null_score_diff_threshold
                                                   ? std::string()
                                                   : best_non_null->text);
    }
    out.nbest.emplace_back(example.qas_id, std::move(nbest));
  }
  return out;
}

void write_prediction_files(const SquadPredictions& predictions, const std::filesystem::path& dir,
                            bool version_2_with_negative) {
  nlohmann::ordered_json answers = nlohmann::ordered_json::object();
  for (const auto& [id, text] : predictions.answers) answers[id] = text;
  nlohmann::ordered_json nbest = nlohmann::ordered_json::object();
  for (const auto& [id, entries] : predictions.nbest) {
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const auto& entry : entries) {
      nlohmann::ordered_json item;
      item["text"] = entry.text;
      item["probability"] = entry.probability;
      item["start_logit"] = entry.start_logit;
      item["end_logit"] = entry.end_logit;
      list.push_back(std::move(item));
    }
    nbest[id] = std::move(list);
  }
  write_file_atomic(dir / "predictions.json", python_json_dumps(answers, 4) + "\n");
  write_file_atomic(dir / "nbest_predictions.json", python_json_dumps(nbest, 4) + "\n");
  if (version_2_with_negative) {
    nlohmann::ordered_json odds = nlohmann::ordered_json::object();
    for (const auto& [id, value] : predictions.null_odds) odds[id] = value;
    write_file_atomic(dir / "null_odds.json", python_json_dumps(odds, 4) + "\n");
  }
}

}  // namespace bertlab::squad
