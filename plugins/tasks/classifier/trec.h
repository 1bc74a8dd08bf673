#pragma once
// TREC question classification (Li and Roth 2002, CogComp's files): train_5500.label (5,452
// questions) to train and TREC_10.label (500) to evaluate, each line "COARSE:fine question".
// The labels and their ids are Hugging Face's `trec` dataset's: coarse_label (6) or fine_label
// (50), in its order.

#include <memory>

#include "processors.h"

namespace bertlab::classifier {

/// The 6 coarse labels (ABBR, ENTY, DESC, HUM, LOC, NUM), or with `fine` the 50 "COARSE:fine"
/// ones, in Hugging Face's order.
const std::vector<std::string>& trec_labels(bool fine);

/// The processor of task_name "trec" (`fine`: trec_labels = "fine").
std::unique_ptr<DataProcessor> make_trec_processor(bool fine);

/// `text` with every byte that is not part of valid UTF-8 dropped, as Google's tokenizer's
/// convert_to_unicode decodes (errors="ignore"); `dropped` counts them.
std::string drop_invalid_utf8(std::string text, size_t& dropped);

}  // namespace bertlab::classifier
