// The official SQuAD metrics, as evaluate-v1.1.py and evaluate-v2.0.py compute them.

#include "squad_eval.h"

#include <bertlab/error.h>
#include <bertlab/log.h>
#include <fmt/format.h>
#include <utf8proc.h>

#include <algorithm>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <bertlab/text/python_text.h>

namespace bertlab::squad {

using nlohmann::json;

namespace {

void append_utf8(std::string& out, char32_t c) {
  utf8proc_uint8_t buf[4];
  const auto n = utf8proc_encode_char(static_cast<utf8proc_int32_t>(c), buf);
  out.append(reinterpret_cast<const char*>(buf), static_cast<size_t>(n));
}

// Python's \w for one code point: letters, digits and other numbers, and "_".
bool is_word_char(char32_t c) {
  if (c == U'_') return true;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO:
      return true;
    default:
      return false;
  }
}

// Unicode's Cased property: a letter with case (Lu, Ll, Lt), one that changes under case
// mapping, or one of Other_Lowercase / Other_Uppercase (ª, º, modifier letters such as ʰ, ...).
bool is_cased(char32_t c) {
  static constexpr std::pair<char32_t, char32_t> kOtherCased[] = {
      {0x00AA, 0x00AA}, {0x00BA, 0x00BA},   {0x02B0, 0x02B8},   {0x02C0, 0x02C1},  {0x02E0, 0x02E4},
      {0x0345, 0x0345}, {0x037A, 0x037A},   {0x10FC, 0x10FC},   {0x1D2C, 0x1D6A},  {0x1D78, 0x1D78},
      {0x1D9B, 0x1DBF}, {0x2071, 0x2071},   {0x207F, 0x207F},   {0x2090, 0x209C},  {0x2160, 0x217F},
      {0x24B6, 0x24E9}, {0x2C7C, 0x2C7D},   {0xA69C, 0xA69D},   {0xA770, 0xA770},  {0xA7F8, 0xA7F9},
      {0xAB5C, 0xAB5F}, {0x1F130, 0x1F149}, {0x1F150, 0x1F169}, {0x1F170, 0x1F189}};
  for (const auto& [first, last] : kOtherCased) {
    if (c >= first && c <= last) return true;
  }
  const auto cp = static_cast<utf8proc_int32_t>(c);
  switch (utf8proc_category(cp)) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
      return true;
    default:
      return utf8proc_tolower(cp) != cp || utf8proc_toupper(cp) != cp;
  }
}

// Unicode's Case_Ignorable property: marks, format characters, modifiers, and the word-internal
// punctuation of UAX #29 (MidLetter, MidNumLet, Single_Quote).
bool is_case_ignorable(char32_t c) {
  switch (c) {
    case U'\'':
    case U'.':
    case U':':
    case U'^':
    case U'`':
    case 0x00A8:
    case 0x00AD:
    case 0x00AF:
    case 0x00B4:
    case 0x00B7:
    case 0x00B8:
    case 0x0387:
    case 0x05F4:
    case 0x2018:
    case 0x2019:
    case 0x2024:
    case 0x2027:
    case 0xFE13:
    case 0xFE52:
    case 0xFE55:
    case 0xFF07:
    case 0xFF0E:
    case 0xFF1A:
      return true;
    default:
      break;
  }
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_SK:
      return true;
    default:
      return false;
  }
}

// Python's str.lower(): the simple lower-case mapping of each code point, plus the two rules of
// the full mapping that CPython applies: U+0130 (I with dot above) becomes "i" + U+0307, and a
// capital sigma that ends a word (cased letter before it, none after, skipping case-ignorable
// characters) becomes the final sigma U+03C2.
std::u32string python_lower(const std::string& text) {
  std::u32string in;
  for (size_t i = 0; i < text.size();) in.push_back(next_code_point(text, i));
  std::u32string out;
  for (size_t i = 0; i < in.size(); ++i) {
    const char32_t c = in[i];
    if (c == 0x0130) {
      out.push_back(U'i');
      out.push_back(0x0307);
      continue;
    }
    if (c == 0x03A3) {
      size_t j = i;
      while (j > 0 && is_case_ignorable(in[j - 1])) --j;
      bool final_sigma = j > 0 && is_cased(in[j - 1]);
      if (final_sigma) {
        size_t k = i + 1;
        while (k < in.size() && is_case_ignorable(in[k])) ++k;
        final_sigma = k == in.size() || !is_cased(in[k]);
      }
      out.push_back(final_sigma ? 0x03C2 : 0x03C3);
      continue;
    }
    out.push_back(static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))));
  }
  return out;
}

bool is_ascii_punctuation(char32_t c) {
  return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) ||
         (c >= 0x7B && c <= 0x7E);
}

bool is_article(const std::u32string& text, size_t begin, size_t end) {
  const std::u32string_view word(text.data() + begin, end - begin);
  return word == U"a" || word == U"an" || word == U"the";
}

std::vector<std::string> tokens_of(const std::string& text) {
  const std::string normalized = normalize_answer(text);  // the views below point into it
  std::vector<std::string> out;
  for (const auto word : python_split(normalized)) out.emplace_back(word);
  return out;
}

// Token F1 of one prediction against one gold answer (collections.Counter intersection);
// `v2` applies evaluate-v2.0.py's rule for empty answers.
double f1_score(const std::vector<std::string>& pred, const std::vector<std::string>& gold,
                bool v2) {
  if (v2 && (pred.empty() || gold.empty())) return pred == gold ? 1.0 : 0.0;
  std::unordered_map<std::string, int64_t> counts;
  for (const auto& t : gold) ++counts[t];
  int64_t same = 0;
  for (const auto& t : pred) {
    auto it = counts.find(t);
    if (it != counts.end() && it->second > 0) {
      --it->second;
      ++same;
    }
  }
  if (same == 0) return 0.0;
  const double precision = 1.0 * static_cast<double>(same) / static_cast<double>(pred.size());
  const double recall = 1.0 * static_cast<double>(same) / static_cast<double>(gold.size());
  return (2 * precision * recall) / (precision + recall);
}

// `parent[key]` as an array, or a DataError naming where in the dataset it is missing.
const json& array_at(const json& parent, const char* key, const std::string& where) {
  const auto it = parent.is_object() ? parent.find(key) : parent.end();
  BERTLAB_CHECK_AS(DataError, it != parent.end() && it->is_array(),
                   "squad evaluate: the dataset's {} has no \"{}\" array (is this a SQuAD file?)",
                   where, key);
  return *it;
}

// Every question of the dataset in file order, with its gold answer texts.
struct Question {
  std::string id;
  std::vector<std::string> golds;  // the "text" of every answer, in order
};

std::vector<Question> questions_of(const json& data) {
  BERTLAB_CHECK_AS(DataError, data.is_array(),
                   "squad evaluate: the dataset's \"data\" must be an array of articles, found {}",
                   data.type_name());
  std::vector<Question> out;
  for (size_t a = 0; a < data.size(); ++a) {
    const std::string article = fmt::format("data[{}]", a);
    const auto& paragraphs = array_at(data[a], "paragraphs", article);
    for (size_t p = 0; p < paragraphs.size(); ++p) {
      const std::string paragraph = fmt::format("{}.paragraphs[{}]", article, p);
      const auto& qas = array_at(paragraphs[p], "qas", paragraph);
      for (size_t k = 0; k < qas.size(); ++k) {
        const std::string where = fmt::format("{}.qas[{}]", paragraph, k);
        const auto id = qas[k].is_object() ? qas[k].find("id") : qas[k].end();
        BERTLAB_CHECK_AS(DataError, id != qas[k].end() && id->is_string(),
                         "squad evaluate: the dataset's {} has no string \"id\"", where);
        Question q;
        q.id = id->get<std::string>();
        for (const auto& answer : array_at(qas[k], "answers", where + " (" + q.id + ")")) {
          const auto text = answer.is_object() ? answer.find("text") : answer.end();
          BERTLAB_CHECK_AS(DataError, text != answer.end() && text->is_string(),
                           "squad evaluate: an answer of question {} has no string \"text\"", q.id);
          q.golds.push_back(text->get<std::string>());
        }
        out.push_back(std::move(q));
      }
    }
  }
  return out;
}

void warn_missing(const std::vector<std::string>& ids) {
  if (ids.empty()) return;
  std::string first;
  for (size_t i = 0; i < ids.size() && i < 5; ++i) first += (i ? ", " : "") + ids[i];
  log_warning("eval", "squad evaluate: {} question(s) have no prediction and score 0 ({}{})",
              ids.size(), first, ids.size() > 5 ? ", ..." : "");
}

}  // namespace

std::string normalize_answer(const std::string& text) {
  // lower(), then remove string.punctuation, in code points.
  std::u32string s;
  for (const char32_t c : python_lower(text)) {
    if (!is_ascii_punctuation(c)) s.push_back(c);
  }
  // re.sub(r'\b(a|an|the)\b', ' ', ...): whole words only, words being runs of \w.
  std::u32string without_articles;
  for (size_t i = 0; i < s.size();) {
    if (!is_word_char(s[i])) {
      without_articles.push_back(s[i++]);
      continue;
    }
    size_t end = i;
    while (end < s.size() && is_word_char(s[end])) ++end;
    if (is_article(s, i, end)) {
      without_articles.push_back(U' ');
    } else {
      without_articles.append(s, i, end - i);
    }
    i = end;
  }
  std::string utf8;
  for (const char32_t c : without_articles) append_utf8(utf8, c);
  return join_python_split(utf8);
}

EvalResult evaluate_v1(const json& data, const AnswerMap& predictions) {
  EvalResult result;
  int64_t exact = 0;
  double f1 = 0.0;
  int64_t total = 0;
  std::vector<std::string> missing;
  for (const auto& q : questions_of(data)) {
    ++total;
    const auto it = predictions.find(q.id);
    if (it == predictions.end()) {
      missing.push_back(q.id);
      continue;
    }
    const std::string pred = normalize_answer(it->second);
    const auto pred_tokens = tokens_of(it->second);
    bool best_exact = false;
    double best_f1 = 0.0;
    for (size_t g = 0; g < q.golds.size(); ++g) {
      const bool em = pred == normalize_answer(q.golds[g]);
      const double score = f1_score(pred_tokens, tokens_of(q.golds[g]), false);
      best_exact = g == 0 ? em : std::max(best_exact, em);
      best_f1 = g == 0 ? score : std::max(best_f1, score);
    }
    exact += best_exact ? 1 : 0;
    f1 += best_f1;
  }
  result.missing = static_cast<int64_t>(missing.size());
  warn_missing(missing);
  const double n = total == 0 ? 1.0 : static_cast<double>(total);
  result.metrics["exact_match"] = 100.0 * static_cast<double>(exact) / n;
  result.metrics["f1"] = 100.0 * f1 / n;
  return result;
}

EvalResult evaluate_v2(const json& data, const AnswerMap& predictions,
                       const std::optional<NullOddsMap>& null_odds, double na_prob_thresh) {
  struct Scored {
    std::string id;
    bool has_answer = false;
    bool predicted = false;
    double exact = 0.0;  // raw, before the no-answer threshold
    double f1 = 0.0;
    double na_prob = 0.0;
  };
  std::unordered_map<std::string, double> odds_of;
  std::unordered_map<std::string, size_t> file_position;  // [null odds entry]
  if (null_odds) {
    for (const auto& [id, value] : *null_odds) {
      odds_of[id] = value;
      file_position.emplace(id, file_position.size());
    }
  }
  std::vector<Scored> scored;
  std::vector<std::string> missing;
  for (const auto& q : questions_of(data)) {
    Scored s;
    s.id = q.id;
    std::vector<std::string> golds;
    for (const auto& g : q.golds) {
      if (!normalize_answer(g).empty()) golds.push_back(g);
    }
    // make_qid_to_has_ans: a question has an answer when its "answers" list is non-empty,
    // even if every text normalizes to "" (its only gold is then "").
    s.has_answer = !q.golds.empty();
    if (golds.empty()) golds.emplace_back();  // a no-answer question's only gold is ""
    const auto it = predictions.find(q.id);
    if (it == predictions.end()) {
      missing.push_back(q.id);
      scored.push_back(std::move(s));
      continue;
    }
    s.predicted = true;
    const std::string pred = normalize_answer(it->second);
    const auto pred_tokens = tokens_of(it->second);
    for (const auto& g : golds) {
      s.exact = std::max(s.exact, pred == normalize_answer(g) ? 1.0 : 0.0);
      s.f1 = std::max(s.f1, f1_score(pred_tokens, tokens_of(g), true));
    }
    if (null_odds) {
      const auto odds = odds_of.find(q.id);
      BERTLAB_CHECK_AS(DataError, odds != odds_of.end(),
                       "squad evaluate: --na_prob_file has no null odds for question {}; give "
                       "one per predicted question (the null_odds.json of the same run)",
                       q.id);
      s.na_prob = odds->second;
    }
    scored.push_back(std::move(s));
  }
  // apply_no_ans_threshold: above the threshold the question counts as answered "no answer".
  const auto thresholded = [&](const Scored& s, double raw) {
    if (!s.predicted) return 0.0;
    return s.na_prob > na_prob_thresh ? (s.has_answer ? 0.0 : 1.0) : raw;
  };
  EvalResult result;
  const auto add_split = [&](const std::string& prefix, int which) {
    double exact = 0.0;
    double f1 = 0.0;
    int64_t total = 0;
    for (const auto& s : scored) {
      if (which == 1 && !s.has_answer) continue;
      if (which == 2 && s.has_answer) continue;
      exact += thresholded(s, s.exact);
      f1 += thresholded(s, s.f1);
      ++total;
    }
    if (which != 0 && total == 0) return;  // the official script leaves an empty split out
    const double n = total == 0 ? 1.0 : static_cast<double>(total);
    result.metrics[prefix + "exact"] = 100.0 * exact / n;
    result.metrics[prefix + "f1"] = 100.0 * f1 / n;
    result.metrics[prefix + "total"] = total;
  };
  add_split("", 0);
  add_split("HasAns_", 1);
  add_split("NoAns_", 2);

  if (null_odds) {
    // find_best_thresh: sweep the questions by rising null odds; at each, everything at or below
    // is answered with its span, everything above gets "no answer".
    std::vector<const Scored*> by_odds;
    int64_t no_answers = 0;
    for (const auto& s : scored) {
      if (!s.predicted) continue;
      by_odds.push_back(&s);
      if (!s.has_answer) ++no_answers;
    }
    // The official sweep visits the null-odds file's keys in its order, stably sorted.
    std::vector<std::pair<size_t, const Scored*>> order;
    order.reserve(by_odds.size());
    for (const auto* s : by_odds) order.emplace_back(file_position.at(s->id), s);
    std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
      if (a.second->na_prob != b.second->na_prob) return a.second->na_prob < b.second->na_prob;
      return a.first < b.first;
    });
    const auto best = [&](bool use_f1) {
      double score = static_cast<double>(no_answers);
      double best_score = score;
      double best_thresh = 0.0;
      for (const auto& [pos, s] : order) {
        double diff;
        if (s->has_answer) {
          diff = use_f1 ? s->f1 : s->exact;
        } else {
          diff = predictions.at(s->id).empty() ? 0.0 : -1.0;
        }
        score += diff;
        if (score > best_score) {
          best_score = score;
          best_thresh = s->na_prob;
        }
      }
      const double n = scored.empty() ? 1.0 : static_cast<double>(scored.size());
      return std::make_pair(100.0 * best_score / n, best_thresh);
    };
    const auto [best_exact, exact_thresh] = best(false);
    const auto [best_f1, f1_thresh] = best(true);
    result.metrics["best_exact"] = best_exact;
    result.metrics["best_exact_thresh"] = exact_thresh;
    result.metrics["best_f1"] = best_f1;
    result.metrics["best_f1_thresh"] = f1_thresh;
  }
  result.missing = static_cast<int64_t>(missing.size());
  warn_missing(missing);
  return result;
}

bool is_squad_v2(const json& dataset) {
  if (const auto it = dataset.find("version"); it != dataset.end() && it->is_string()) {
    const auto& v = it->get_ref<const std::string&>();
    if (v.rfind("v2", 0) == 0 || v.rfind('2', 0) == 0) return true;
  }
  const auto data = dataset.find("data");
  if (data == dataset.end() || !data->is_array()) return false;
  for (const auto& article : *data) {
    const auto ps = article.find("paragraphs");
    if (ps == article.end() || !ps->is_array()) continue;
    for (const auto& p : *ps) {
      const auto qas = p.find("qas");
      if (qas == p.end() || !qas->is_array()) continue;
      for (const auto& qa : *qas) {
        if (qa.contains("is_impossible")) return true;
      }
    }
  }
  return false;
}

}  // namespace bertlab::squad
