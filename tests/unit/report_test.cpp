// Reports of a real `bertlab run` (the executable, the in-tree plugins, a tiny model):
// report.html and plots/, `bertlab compare` rebuilding them from the run folders, TensorBoard
// event files read back by a decoder of this test's own, and report.html rendered by headless
// Chromium.

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "test_util.h"

namespace bertlab {
namespace {

namespace fs = std::filesystem;
using testing::data_path;
using testing::read_file;
using testing::read_jsonl;
using testing::run_bertlab;
using testing::TempDir;

// The end-to-end experiment, shortened: 30 steps, a metrics line every 10.
std::vector<std::string> run_args(const fs::path& out, bool tensorboard) {
  std::vector<std::string> args = {"run",          data_path("experiments/overfit.toml").string(),
                                   "--output-dir", out.string(),
                                   "--set",        "train.num_train_steps=30"};
  if (tensorboard) args.insert(args.end(), {"--set", "experiment.tensorboard=true"});
  return args;
}

class Report : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    result_ = new testing::CommandResult(run_bertlab(run_args(dir_->path(), true)));
  }
  static void TearDownTestSuite() {
    delete result_;
    delete dir_;
  }
  static fs::path out(const std::string& rel = "") { return dir_->path() / "overfit" / rel; }

  static TempDir* dir_;
  static testing::CommandResult* result_;
};

TempDir* Report::dir_ = nullptr;
testing::CommandResult* Report::result_ = nullptr;

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

const char* const kPlots[] = {"loss", "learning_rate", "grad_norm", "throughput", "eval"};

TEST_F(Report, RunWritesASelfContainedReportWithEveryPlot) {
  ASSERT_EQ(result_->exit_code, 0) << result_->err;
  EXPECT_NE(result_->out.find("report.html"), std::string::npos);
  const std::string html = read_file(out("report.html"));
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  // Self-contained: no scripts, stylesheets, images or fonts fetched from anywhere.
  for (const char* banned : {"<script", "<link", "<img", "src=", "@import", "url(", "https:"}) {
    EXPECT_EQ(html.find(banned), std::string::npos) << banned;
  }
  // The only URL is the SVG namespace name (an identifier, never fetched).
  EXPECT_EQ(count(html, "http://"), count(html, "http://www.w3.org/2000/svg"));
  // The comparison table, as comparison.csv has it.
  const std::string csv = read_file(out("comparison.csv"));
  EXPECT_NE(csv.find("variant,steps,final_loss,eval_accuracy"), std::string::npos) << csv;
  EXPECT_NE(html.find("<th>max_param_diff_vs_dense</th>"), std::string::npos);
  EXPECT_NE(html.find("<td>dense</td><td class=\"num\">30</td>"), std::string::npos);
  EXPECT_NE(html.find("<td>sparse</td><td class=\"num\">30</td>"), std::string::npos);
  // Eval metrics side by side: a row per metric, a column per variant.
  EXPECT_NE(html.find("<th>metric</th><th>dense</th><th>sparse</th>"), std::string::npos);
  const auto dense_eval = nlohmann::json::parse(read_file(out("dense/eval_results.json")));
  EXPECT_NE(html.find(fmt::format("<td>eval_accuracy</td><td class=\"num\">{:.4f}</td>",
                                  dense_eval["eval_accuracy"].get<double>())),
            std::string::npos);
  // The task's floor beside the variants, as the runs wrote it (floor.json): in the table, the
  // CSV and the page.
  const auto floor = nlohmann::json::parse(read_file(out("dense/floor.json")));
  const std::string floor_row = "floor: " + floor["name"].get<std::string>();
  EXPECT_EQ(floor_row.rfind("floor: majority class (", 0), 0u) << floor_row;
  EXPECT_NE(
      csv.find(fmt::format("\n{},,,{:.4f},", floor_row, floor["eval_accuracy"].get<double>())),
      std::string::npos)
      << csv;
  EXPECT_NE(html.find("<td>" + floor_row + "</td>"), std::string::npos);
  // Every plot as a file, linked from comparison.md, and inline in the page.
  const std::string md = read_file(out("comparison.md"));
  EXPECT_NE(md.find("| " + floor_row + " |"), std::string::npos) << md;
  for (const char* name : kPlots) {
    const fs::path svg = out(std::string("plots/") + name + ".svg");
    ASSERT_TRUE(fs::is_regular_file(svg)) << svg;
    const std::string text = read_file(svg);
    EXPECT_NE(md.find(std::string("(plots/") + name + ".svg)"), std::string::npos) << name;
    EXPECT_NE(html.find(text), std::string::npos) << name;
    EXPECT_NE(text.find(">dense</text>"), std::string::npos) << name;
    EXPECT_NE(text.find(">sparse</text>"), std::string::npos) << name;
  }
}

TEST_F(Report, LinePlotsDrawEveryVariantsMetricsAgainstStep) {
  ASSERT_EQ(result_->exit_code, 0) << result_->err;
  for (const char* name : {"loss", "learning_rate", "grad_norm", "throughput"}) {
    const std::string svg = read_file(out(std::string("plots/") + name + ".svg"));
    EXPECT_EQ(count(svg, "<polyline"), 2u) << name;  // one per variant
    // Three logged steps per variant: a marker each.
    EXPECT_EQ(count(svg, "<circle"), 6u) << name;
    EXPECT_NE(svg.find(">step</text>"), std::string::npos);
  }
  // The x axis spans the logged steps 10..30.
  const std::string loss = read_file(out("plots/loss.svg"));
  EXPECT_NE(loss.find(">10</text>"), std::string::npos);
  EXPECT_NE(loss.find(">30</text>"), std::string::npos);
}

TEST_F(Report, CompareRebuildsTheSameComparisonFromTheRunFolders) {
  ASSERT_EQ(result_->exit_code, 0) << result_->err;
  TempDir other;
  const auto r = run_bertlab({"compare", out().string(), "--output", other.path().string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Same numbers as the run wrote, read back from run_summary.json, eval_results.json and
  // model.safetensors (the parameter difference).
  EXPECT_EQ(read_file(other / "comparison.csv"), read_file(out("comparison.csv")));
  for (const char* name : kPlots) {
    EXPECT_EQ(read_file(other / (std::string("plots/") + name + ".svg")),
              read_file(out(std::string("plots/") + name + ".svg")))
        << name;
  }
  EXPECT_TRUE(fs::is_regular_file(other / "report.html"));
  // Without --output: into the experiment folder the runs are in.
  TempDir copy;
  fs::copy(out(), copy / "overfit", fs::copy_options::recursive);
  fs::remove_all(copy / "overfit/plots");
  fs::remove(copy / "overfit/report.html");
  const auto here = run_bertlab({"compare", (copy / "overfit").string()});
  ASSERT_EQ(here.exit_code, 0) << here.err;
  EXPECT_TRUE(fs::is_regular_file(copy / "overfit/report.html"));
  EXPECT_EQ(read_file(copy / "overfit/plots/loss.svg"), read_file(out("plots/loss.svg")));
  EXPECT_EQ(read_file(copy / "overfit/comparison.csv"), read_file(out("comparison.csv")));
  // A variant folder alone, with another reference.
  TempDir one;
  const auto v = run_bertlab({"compare", out("sparse").string(), out("dense").string(),
                              "--reference", "sparse", "--output", one.path().string()});
  ASSERT_EQ(v.exit_code, 0) << v.err;
  const std::string csv = read_file(one / "comparison.csv");
  EXPECT_NE(csv.find("max_param_diff_vs_sparse"), std::string::npos) << csv;
  EXPECT_LT(csv.find("\nsparse,"), csv.find("\ndense,")) << "the order given";
}

TEST_F(Report, CompareAcrossExperimentsLabelsVariantsByExperiment) {
  ASSERT_EQ(result_->exit_code, 0) << result_->err;
  // A second experiment's runs: the same folders under another experiment name.
  TempDir runs;
  fs::copy(out(), runs / "first", fs::copy_options::recursive);
  fs::copy(out(), runs / "second", fs::copy_options::recursive);
  const auto refused =
      run_bertlab({"compare", (runs / "first").string(), (runs / "second").string()});
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.err.find("--output"), std::string::npos) << refused.err;
  const auto r = run_bertlab({"compare", (runs / "first").string(), (runs / "second").string(),
                              "--output", (runs / "both").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string csv = read_file(runs / "both/comparison.csv");
  for (const char* label : {"first/dense,", "first/sparse,", "second/dense,", "second/sparse,"}) {
    EXPECT_NE(csv.find(std::string("\n") + label), std::string::npos) << label << "\n" << csv;
  }
  // The same weights: zero difference from the reference (the first variant).
  const size_t begin = csv.find("\nsecond/dense,30,");
  ASSERT_NE(begin, std::string::npos) << csv;
  const std::string line = csv.substr(begin + 1, csv.find('\n', begin + 1) - begin - 1);
  EXPECT_EQ(line.substr(line.rfind(',')), ",0") << line;
  EXPECT_EQ(count(read_file(runs / "both/plots/loss.svg"), "<polyline"), 4u);
}

TEST(Compare, AFolderThatIsNotARunIsAClearError) {
  TempDir dir;
  fs::create_directories(dir / "empty/sub");
  const auto r = run_bertlab({"compare", (dir / "empty").string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find((dir / "empty").string() + ": not a bertlab run"), std::string::npos)
      << r.err;
  const auto missing = run_bertlab({"compare", (dir / "nope").string()});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("no such folder"), std::string::npos) << missing.err;
  // A malformed metrics.jsonl is named with its line.
  testing::write_file(dir / "bad/v/metrics.jsonl", "{\"step\":10,\"loss\":1}\n{\"loss\":2}\n");
  const auto bad = run_bertlab({"compare", (dir / "bad").string()});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("metrics.jsonl:2: no \"step\""), std::string::npos) << bad.err;
}

// An independent reading of the event files: CRC-32C bit by bit (polynomial 0x82F63B78,
// reflected), TFRecord framing and the protobuf wire format.
uint32_t crc32c_bitwise(const std::string& bytes) {
  uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char b : bytes) {
    crc ^= b;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
  }
  return ~crc;
}

uint32_t masked(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

template <typename T>
T little_endian(const std::string& s, size_t at) {
  T v;
  std::memcpy(&v, s.data() + at, sizeof(T));
  return v;
}

struct DecodedEvent {
  double wall_time = 0;
  int64_t step = 0;
  std::string file_version;
  std::map<std::string, float> scalars;
};

struct Wire {
  const std::string& s;
  size_t at = 0;
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0;; shift += 7) {
      const auto b = static_cast<uint8_t>(s.at(at++));
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
  }
  std::string bytes() {
    const size_t n = varint();
    std::string out = s.substr(at, n);
    EXPECT_EQ(out.size(), n);
    at += n;
    return out;
  }
  bool done() const { return at >= s.size(); }
};

DecodedEvent decode_event(const std::string& record) {
  DecodedEvent e;
  Wire w{record};
  while (!w.done()) {
    const uint64_t key = w.varint();
    switch (key) {
      case (1 << 3) | 1:
        e.wall_time = little_endian<double>(record, w.at);
        w.at += 8;
        break;
      case (2 << 3) | 0:
        e.step = static_cast<int64_t>(w.varint());
        break;
      case (3 << 3) | 2:
        e.file_version = w.bytes();
        break;
      case (5 << 3) | 2: {
        const std::string summary = w.bytes();
        Wire sw{summary};
        while (!sw.done()) {
          EXPECT_EQ(sw.varint(), (1u << 3) | 2);  // Summary.value
          const std::string value = sw.bytes();
          Wire vw{value};
          std::string tag;
          float simple = NAN;
          while (!vw.done()) {
            const uint64_t vkey = vw.varint();
            if (vkey == ((1 << 3) | 2)) {
              tag = vw.bytes();
            } else {
              EXPECT_EQ(vkey, (2u << 3) | 5);  // simple_value, fixed32
              simple = little_endian<float>(value, vw.at);
              vw.at += 4;
            }
          }
          e.scalars[tag] = simple;
        }
        break;
      }
      default:
        ADD_FAILURE() << "unexpected Event field key " << key;
        return e;
    }
  }
  return e;
}

std::vector<std::string> read_records(const fs::path& path) {
  const std::string file = read_file(path);
  std::vector<std::string> records;
  size_t at = 0;
  while (at < file.size()) {
    EXPECT_LE(at + 12, file.size());
    const std::string length_bytes = file.substr(at, 8);
    const auto length = little_endian<uint64_t>(file, at);
    EXPECT_EQ(little_endian<uint32_t>(file, at + 8), masked(crc32c_bitwise(length_bytes)))
        << "length crc of record " << records.size();
    EXPECT_LE(at + 12 + length + 4, file.size());
    const std::string data = file.substr(at + 12, length);
    EXPECT_EQ(little_endian<uint32_t>(file, at + 12 + length), masked(crc32c_bitwise(data)))
        << "data crc of record " << records.size();
    records.push_back(data);
    at += 12 + length + 4;
  }
  EXPECT_EQ(at, file.size());
  return records;
}

TEST(TensorBoardCrc, BitwiseDecoderAgreesWithTheKnownCheckValue) {
  // The CRC-32C check value (RFC 3720, "123456789"), so the decoder itself can be trusted.
  EXPECT_EQ(crc32c_bitwise("123456789"), 0xE3069283u);
}

TEST_F(Report, TensorBoardEventFilesHoldEveryMetricPerStep) {
  ASSERT_EQ(result_->exit_code, 0) << result_->err;
  for (const char* variant : {"dense", "sparse"}) {
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(out(variant))) {
      if (entry.path().filename().string().rfind("events.out.tfevents.", 0) == 0) {
        files.push_back(entry.path());
      }
    }
    ASSERT_EQ(files.size(), 1u) << variant;
    const auto summary = nlohmann::json::parse(read_file(out(variant) / "run_summary.json"));
    const double start = summary["start_time"].get<double>();
    // events.out.tfevents.<start time in seconds>.<host>
    const std::string name = files[0].filename().string();
    EXPECT_EQ(name.rfind(fmt::format("events.out.tfevents.{}.", static_cast<int64_t>(start)), 0),
              0u)
        << name;

    const auto records = read_records(files[0]);
    const auto lines = read_jsonl(out(variant) / "metrics.jsonl");
    const auto eval = nlohmann::json::parse(read_file(out(variant) / "eval_results.json"));
    // file_version, one per metrics line, one for eval.
    ASSERT_EQ(records.size(), 1 + lines.size() + 1) << variant;
    const DecodedEvent first = decode_event(records[0]);
    EXPECT_EQ(first.file_version, "brain.Event:2");
    EXPECT_DOUBLE_EQ(first.wall_time, start);
    double previous_time = start;
    for (size_t i = 0; i < lines.size(); ++i) {
      const DecodedEvent e = decode_event(records[1 + i]);
      EXPECT_EQ(e.step, lines[i]["step"].get<int64_t>());
      EXPECT_GE(e.wall_time, previous_time);
      previous_time = e.wall_time;
      EXPECT_NEAR(e.wall_time, start + lines[i]["elapsed_s"].get<double>(), 1e-6);
      const std::map<std::string, const char*> keys = {{"loss", "loss"},
                                                       {"learning_rate", "learning_rate"},
                                                       {"grad_norm", "grad_norm"},
                                                       {"throughput", "examples_per_second"}};
      ASSERT_EQ(e.scalars.size(), keys.size());
      for (const auto& [tag, key] : keys) {
        ASSERT_TRUE(e.scalars.count(tag)) << tag;
        EXPECT_EQ(e.scalars.at(tag), static_cast<float>(lines[i][key].get<double>())) << tag;
      }
    }
    const DecodedEvent last = decode_event(records.back());
    EXPECT_EQ(last.step, 30);
    size_t metrics = 0;
    for (auto it = eval.begin(); it != eval.end(); ++it) {
      if (it.key() == "global_step") continue;
      ++metrics;
      ASSERT_TRUE(last.scalars.count("eval/" + it.key())) << it.key();
      EXPECT_EQ(last.scalars.at("eval/" + it.key()), static_cast<float>(it->get<double>()));
    }
    EXPECT_EQ(last.scalars.size(), metrics);
    EXPECT_GE(metrics, 2u);
  }
}

TEST(TensorBoardOff, NoEventFilesUnlessAskedFor) {
  TempDir dir;
  const auto r = run_bertlab(run_args(dir.path(), false));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const auto& entry : fs::recursive_directory_iterator(dir.path())) {
    EXPECT_EQ(entry.path().filename().string().find("tfevents"), std::string::npos) << entry.path();
  }
  EXPECT_TRUE(fs::is_regular_file(dir / "overfit/report.html"));
}

// Headless Chromium on report.html with `mode` (e.g. "--screenshot='F'" or "--dump-dom"), a
// private profile so that parallel tests and a user's browser do not share one; stdout to
// `stdout_file`, stderr to chromium.log. Returns the command on failure, "" on success.
std::string run_chromium(const fs::path& dir, const std::string& mode,
                         const fs::path& stdout_file) {
  const char* chromium = "/usr/bin/chromium";
  if (!fs::exists(chromium)) {
    return fmt::format("{} is missing: install Debian's chromium (scripts/setup-deps.sh)",
                       chromium);
  }
  const fs::path log = dir / "chromium.log";
  const std::string command = fmt::format(
      "'{}' --headless --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir='{}' {} "
      "--window-size=1200,1600 'file://{}' >'{}' 2>'{}'",
      chromium, (dir / "profile").string(), mode, (dir / "overfit/report.html").string(),
      stdout_file.string(), log.string());
  if (std::system(command.c_str()) != 0) return command + "\n" + read_file(log);
  return "";
}

TEST_F(Report, ChromiumRendersTheReport) {
  ASSERT_EQ(result_->exit_code, 0) << result_->err;
  const fs::path png = dir_->path() / "report.png";
  const std::string failed =
      run_chromium(dir_->path(), fmt::format("--screenshot='{}'", png.string()),
                   dir_->path() / "screenshot.out");
  ASSERT_EQ(failed, "");
  ASSERT_TRUE(fs::is_regular_file(png)) << read_file(dir_->path() / "chromium.log");
  const std::string bytes = read_file(png);
  ASSERT_GT(bytes.size(), 24u);
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  EXPECT_EQ(bytes.substr(12, 4), "IHDR");
  auto big_endian = [&](size_t at) {
    return (static_cast<uint32_t>(static_cast<uint8_t>(bytes[at])) << 24) |
           (static_cast<uint32_t>(static_cast<uint8_t>(bytes[at + 1])) << 16) |
           (static_cast<uint32_t>(static_cast<uint8_t>(bytes[at + 2])) << 8) |
           static_cast<uint32_t>(static_cast<uint8_t>(bytes[at + 3]));
  };
  EXPECT_EQ(big_endian(16), 1200u);
  EXPECT_EQ(big_endian(20), 1600u);
  // A blank page of this size compresses to a few KB; tables, text and plots do not.
  EXPECT_GT(bytes.size(), 40000u) << "the screenshot looks empty: " << png;
  fs::copy_file(png, fs::path(BERTLAB_BUILD_DIR) / "report-screenshot.png",
                fs::copy_options::overwrite_existing);
}

// The document as Chromium parsed it: every variant in the comparison table, in the eval table
// and in every plot's legend, and every plot an SVG element (a markup error would drop or
// re-nest them).
TEST_F(Report, ChromiumParsesEveryVariantAndPlot) {
  ASSERT_EQ(result_->exit_code, 0) << result_->err;
  const fs::path dom_file = dir_->path() / "dom.html";
  const std::string failed = run_chromium(dir_->path(), "--dump-dom", dom_file);
  ASSERT_EQ(failed, "");
  const std::string dom = read_file(dom_file);
  const std::string html = read_file(out("report.html"));
  ASSERT_NE(dom.find("<body"), std::string::npos) << dom.substr(0, 2000);
  EXPECT_GE(count(html, "<svg"), std::size(kPlots));
  EXPECT_EQ(count(dom, "<svg"), count(html, "<svg"));
  EXPECT_EQ(count(dom, "</svg>"), count(html, "</svg>"));
  EXPECT_NE(dom.find("<th>metric</th><th>dense</th><th>sparse</th>"), std::string::npos);
  for (const char* variant : {"dense", "sparse"}) {
    EXPECT_NE(dom.find(fmt::format("<td>{}</td><td class=\"num\">30</td>", variant)),
              std::string::npos)
        << variant;
    // Its legend entry in every plot.
    const std::string label = fmt::format(">{}</text>", variant);
    EXPECT_GE(count(html, label), std::size(kPlots)) << variant;
    EXPECT_EQ(count(dom, label), count(html, label)) << variant;
  }
}

}  // namespace
}  // namespace bertlab
